import click


@click.command()
def migrate() -> None:
    """Migrate."""
