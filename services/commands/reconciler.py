"""`settle reconciler`: run the reconciliation service (the engine of `settle reconcile`, on a
schedule, one replica at a time)."""

from __future__ import annotations

import click

from services.commands.listening import host_option, port_option, service_settings
from services.domain.errors import ConfigError
from services.platform.logs import use_log_format
from services.platform.service_settings import ReconcilerSettings
from services.platform.tracing import use_exporter


@click.command(
    short_help="Run the reconciler: intraday and end-of-day runs and re-checks, on a schedule."
)
@host_option
@port_option(8084, "Where /healthz and /metrics listen.")
def reconciler(host: str, port: int) -> None:
    """Run the reconciler: intraday runs every SETTLE_RECONCILE_INTERVAL seconds, each closed
    day's end-of-day run once, re-checks at SETTLE_RECONCILE_RECHECK_AGES; /metrics."""
    from services.apps.reconciler import serve

    settings = service_settings(ReconcilerSettings, host)
    use_log_format(settings.log_format, "reconciler", settings.log_level)
    use_exporter(settings.otel_exporter, "reconciler")
    click.echo(f"reconciler on http://{host}:{port} (/healthz, /metrics)", err=True)
    import uvloop  # the one loop every settle service runs on

    try:
        uvloop.run(serve(settings, host, port))
    except ConfigError as e:  # a schema older than this code, among others
        raise click.ClickException(str(e)) from e
