"""`settle relay`: run a relay replica."""

from __future__ import annotations

import logging

import click

from services.commands.listening import host_option, port_option, service_settings
from services.domain.errors import ConfigError
from services.platform.logs import use_log_format
from services.platform.service_settings import RelaySettings
from services.platform.tracing import use_exporter


@click.command()
@host_option
@port_option(9101, "Where /metrics and /healthz listen.", "--metrics-port", "--port")
def relay(host: str, port: int) -> None:
    """Run a relay: outbox to Kafka, and rail dispatch under deterministic keys."""
    from services.apps.relay import serve

    settings = service_settings(RelaySettings, host)
    use_log_format(settings.log_format, "relay", settings.log_level)
    use_exporter(settings.otel_exporter, "relay")
    # stripe logs two lines per rail call at INFO; the relay's own metrics count the calls.
    logging.getLogger("stripe").setLevel(logging.WARNING)
    click.echo(f"relay metrics on http://{host}:{port}/metrics", err=True)
    import uvloop  # event-loop and socket work dominate; uvloop halves its cost

    try:
        uvloop.run(serve(settings, host, port))
    except ConfigError as e:  # a combination of settings the composition root refuses
        raise click.ClickException(str(e)) from e
