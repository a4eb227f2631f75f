"""`settle ledger`: run the ledger service."""

from __future__ import annotations

import logging

import click

from services.shared.config import load_settings
from services.shared.errors import ConfigError


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8081, show_default=True, type=click.IntRange(1, 65535))
@click.option("--no-kafka", is_flag=True, help="Serve HTTP only; do not consume commands.")
def ledger(host: str, port: int, no_kafka: bool) -> None:
    """Run the ledger: POST /v1/settlements, reads, metrics, and the Kafka command intake."""
    from services.ledger.app import serve

    try:
        settings = load_settings(service="ledger")
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    click.echo(f"ledger listening on http://{host}:{port}", err=True)
    import uvloop  # event-loop and socket work dominate; uvloop halves its cost

    try:
        uvloop.run(serve(settings, host, port, consume=not no_kafka))
    except ConfigError as e:  # a combination of settings the composition root refuses
        raise click.ClickException(str(e)) from e
