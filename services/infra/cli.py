import click


@click.group()
def infra() -> None:
    """Local PostgreSQL and Kafka."""
