import click


@click.command()
def bench() -> None:
    """Benchmarks."""
