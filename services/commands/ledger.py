"""`settle ledger`: run the ledger service."""

from __future__ import annotations

import click

from services.commands.listening import (
    admin_port_option,
    host_option,
    port_option,
    service_settings,
)
from services.domain.errors import ConfigError
from services.platform.logs import use_log_format
from services.platform.service_settings import LedgerSettings
from services.platform.tracing import use_exporter


@click.command(
    short_help="Run the ledger: the tenant API, its admin port and the Kafka command intake."
)
@host_option
@port_option(8081, "The tenant API and /healthz: the port tenants reach.")
@admin_port_option(9081, "/readyz, /metrics, /docs: for operators and Prometheus, never tenants.")
@click.option("--no-kafka", is_flag=True, help="Serve HTTP only; do not consume commands.")
def ledger(host: str, port: int, admin_port: int, no_kafka: bool) -> None:
    """Run the ledger: the tenant API (POST /v1/settlements, reads) on --port, readiness and
    metrics on --admin-port, and the Kafka command intake."""
    from services.apps.ledger import serve

    if admin_port == port:
        raise click.UsageError("--admin-port must differ from --port")
    settings = service_settings(LedgerSettings, host)
    use_log_format(settings.log_format, "ledger", settings.log_level)
    use_exporter(settings.otel_exporter, "ledger")
    click.echo(
        f"ledger listening on http://{host}:{port}, admin http://{host}:{admin_port}", err=True
    )
    import uvloop  # event-loop and socket work dominate; uvloop halves its cost

    try:
        uvloop.run(serve(settings, host, port, admin_port, consume=not no_kafka))
    except ConfigError as e:  # a combination of settings the composition root refuses
        raise click.ClickException(str(e)) from e
