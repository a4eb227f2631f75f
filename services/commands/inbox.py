"""`settle inbox`: run the inbox service; `settle inbox replay EVENT`: replay a dead event."""

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
from services.platform.service_settings import InboxSettings
from services.platform.settings import load_settings
from services.platform.tracing import use_exporter


def _settings() -> InboxSettings:
    try:
        return load_settings(kind=InboxSettings)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


@click.group(
    invoke_without_command=True,
    short_help="Run the inbox: the rail's webhooks, the apply workers, readiness and metrics.",
)
@host_option
@port_option(8083, "POST /v1/webhooks/stripe and /healthz: the port the rail reaches.")
@admin_port_option(9083, "/readyz, /metrics, /docs: for operators and Prometheus only.")
@click.pass_context
def inbox(ctx: click.Context, host: str, port: int, admin_port: int) -> None:
    """Run the inbox: POST /v1/webhooks/stripe on --port, the apply workers, and readiness
    and metrics on --admin-port."""
    if ctx.invoked_subcommand is not None:
        return
    if admin_port == port:
        raise click.UsageError("--admin-port must differ from --port")
    import uvloop

    from services.apps.inbox import serve

    settings = service_settings(InboxSettings, host)
    use_log_format(settings.log_format, "inbox", settings.log_level)
    use_exporter(settings.otel_exporter, "inbox")
    click.echo(
        f"inbox listening on http://{host}:{port}, admin http://{host}:{admin_port}", err=True
    )
    # uvloop: the webhook path is event-loop and socket work more than anything else.
    uvloop.run(serve(settings, host, port, admin_port))


@inbox.command("replay")
@click.argument("event")
@click.option("--actor", required=True, help="Who replays it: the operator the token is of.")
def replay_command(event: str, actor: str) -> None:
    """Send a dead or parked event (inbox row id or rail event id) back to be applied, through
    the operator API; in two-person mode, propose it for another operator to approve."""
    from services.commands.common import awaiting, through_api
    from services.commands.operator_api import OperatorApi, segment

    async def work(api: OperatorApi) -> None:
        _, done = await api.post(f"/v1/inbox/{segment(event)}/replay")
        if "action" in done:  # a proposal
            click.echo(awaiting(done))
        else:
            click.echo(f"inbox event {done['id']} queued for replay by {actor}")

    through_api("inbox replay", False, work, actor)
