"""`settle console`: run the operator console."""

from __future__ import annotations

import click

from services.commands.listening import host_option, port_option, service_settings
from services.domain.errors import ConfigError
from services.platform.logs import use_log_format
from services.platform.service_settings import ConsoleSettings

DEFAULT_PORT = 9085  # services.apps.console.DEFAULT_PORT, without importing the app here


@click.command(short_help="Run the operators' web console.")
@host_option
@port_option(DEFAULT_PORT, "Where the console's pages listen: for operators only.")
def console(host: str, port: int) -> None:
    """Run the operator console: sign in with an operator token (SETTLE_OPERATOR_TOKENS), then
    the overview, settlement search and story, review queue, breaks, webhooks and audit."""
    from services.apps.console import serve

    settings = service_settings(ConsoleSettings, host)
    use_log_format(settings.log_format, "console", settings.log_level)
    click.echo(f"console on http://{host}:{port}/ (sign in with an operator token)", err=True)
    import uvloop  # the one loop every settle service runs on

    try:
        uvloop.run(serve(settings, host, port))
    except ConfigError as e:  # a schema older than this code, among others
        raise click.ClickException(str(e)) from e
