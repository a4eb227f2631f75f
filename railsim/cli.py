"""`settle railsim`: run the rail simulator."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from railsim.app import DEFAULT_WEBHOOK_SECRET, SimOptions, serve
from railsim.errors import FaultsError, JournalError
from railsim.faults import PROFILES, profile, updated
from railsim.habits import PROFILES as ACTIVITIES
from railsim.habits import HabitsError, account_habits
from railsim.webhooks import DEFAULT_CONCURRENCY, RetryPolicy


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=12111, show_default=True, type=click.IntRange(1, 65535))
@click.option("--webhook-url", default=None, help="Where to POST events; none are sent if absent.")
@click.option(
    "--webhook-secret",
    envvar="STRIPE_WEBHOOK_SECRET",
    default=DEFAULT_WEBHOOK_SECRET,
    show_default=True,
    help="Signing secret (env STRIPE_WEBHOOK_SECRET; of a comma-separated list, the first).",
)
@click.option(
    "--idempotency-window",
    default=86400.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds a key is honoured; 0 ignores keys entirely.",
)
@click.option(
    "--fault-profile", default="none", show_default=True, type=click.Choice(sorted(PROFILES))
)
@click.option("--seed", default=None, type=int, help="Seed of the fault dice (default: profile's).")
@click.option(
    "--webhook-concurrency",
    envvar="SETTLE_RAILSIM_WEBHOOK_CONCURRENCY",
    default=DEFAULT_CONCURRENCY,
    show_default=True,
    type=click.IntRange(min=1),
    help="Webhook attempts in flight at once (env SETTLE_RAILSIM_WEBHOOK_CONCURRENCY).",
)
@click.option(
    "--webhook-delay-ms",
    envvar="SETTLE_RAILSIM_WEBHOOK_DELAY_MS",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Milliseconds from an event to its first delivery (env SETTLE_RAILSIM_WEBHOOK_DELAY_MS).",
)
@click.option(
    "--answer-delay-ms",
    envvar="SETTLE_RAILSIM_ANSWER_DELAY_MS",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Milliseconds every API call takes to answer (env SETTLE_RAILSIM_ANSWER_DELAY_MS).",
)
@click.option(
    "--account-activity",
    envvar="SETTLE_RAILSIM_ACCOUNT_ACTIVITY",
    default="none",
    show_default=True,
    type=click.Choice(sorted(ACTIVITIES)),
    help="The account's own habits: charges, fees, automatic payouts, payouts in transit, "
    "arrival dates on bank days (env SETTLE_RAILSIM_ACCOUNT_ACTIVITY).",
)
@click.option(
    "--data-dir",
    envvar="SETTLE_RAILSIM_DATA_DIR",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep every object, key and report run here across restarts "
    "(env SETTLE_RAILSIM_DATA_DIR; default: memory only).",
)
@click.option(
    "--files-port",
    envvar="SETTLE_RAILSIM_FILES_PORT",
    default=None,
    type=click.IntRange(1, 65535),
    help="Serve report files on this port (the files host); default: under /files on --port.",
)
@click.option(
    "--payout-pending-seconds",
    envvar="SETTLE_RAILSIM_PAYOUT_PENDING_SECONDS",
    default=None,
    type=click.FloatRange(min=0),
    help="Seconds a payout stays pending before it goes in transit (default: the activity's).",
)
@click.option(
    "--payout-transit-seconds",
    envvar="SETTLE_RAILSIM_PAYOUT_TRANSIT_SECONDS",
    default=None,
    type=click.FloatRange(min=0),
    help="Seconds a payout stays in transit before it pays or fails (default: the activity's).",
)
@click.option(
    "--report-data-interval",
    envvar="SETTLE_RAILSIM_REPORT_DATA_INTERVAL",
    default=None,
    type=click.IntRange(min=1),
    help="Reports hold data up to the start of the current period of this many seconds "
    "(default: the activity's; realistic 3600, none 1).",
)
def railsim(**given: Any) -> None:
    """Run the rail simulator: Stripe's transfers and payouts API, signed webhooks, faults.

    With --account-activity realistic the account also has charges, fees, automatic payouts
    and payouts in transit; its balance reports run through Stripe's Reporting API."""
    options = _options(**given)
    host, port = str(given["host"]), int(given["port"])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    target = options.webhook_url or "nowhere (no --webhook-url)"
    click.echo(f"railsim listening on http://{host}:{port}, webhooks to {target}", err=True)
    import uvloop  # event-loop and socket work dominate; uvloop halves its cost

    try:
        uvloop.run(serve(options, host, port))
    except OSError as e:
        raise click.ClickException(f"cannot listen or keep data: {e}") from e
    except JournalError as e:
        raise click.ClickException(str(e)) from e


def _options(
    host: str,
    port: int,
    webhook_url: str | None,
    webhook_secret: str,
    idempotency_window: float,
    fault_profile: str,
    seed: int | None,
    webhook_concurrency: int,
    webhook_delay_ms: int,
    answer_delay_ms: int,
    account_activity: str,
    data_dir: Path | None,
    files_port: int | None,
    payout_pending_seconds: float | None,
    payout_transit_seconds: float | None,
    report_data_interval: int | None,
) -> SimOptions:
    """The simulator's options from the command line's; ClickException for a bad one."""
    secret = webhook_secret.split(",")[0].strip()
    if not secret:
        raise click.BadParameter("must not be empty", param_hint="--webhook-secret")
    if files_port == port:
        raise click.BadParameter("must differ from --port", param_hint="--files-port")
    try:
        faults = profile(fault_profile)
        faults = updated(faults, {"seed": seed}) if seed is not None else faults
        habits = account_habits(
            account_activity,
            payout_pending_seconds=payout_pending_seconds,
            payout_transit_seconds=payout_transit_seconds,
            report_data_interval=report_data_interval,
        )
    except (FaultsError, HabitsError) as e:
        raise click.ClickException(str(e)) from e
    retry = RetryPolicy(concurrency=webhook_concurrency, delay=webhook_delay_ms / 1000)
    return SimOptions(
        webhook_url,
        secret,
        idempotency_window,
        faults,
        retry,
        answer_delay_ms / 1000,
        habits,
        data_dir,
        files_port,
    )
