"""`settle railsim`: run the rail simulator."""

from __future__ import annotations

import logging

import click

from railsim.app import DEFAULT_WEBHOOK_SECRET, SimOptions, serve
from railsim.errors import FaultsError
from railsim.faults import PROFILES, profile, updated
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
def railsim(
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
) -> None:
    """Run the rail simulator: Stripe's transfers and payouts API, signed webhooks, faults."""
    secret = webhook_secret.split(",")[0].strip()
    if not secret:
        raise click.BadParameter("must not be empty", param_hint="--webhook-secret")
    try:
        faults = profile(fault_profile)
        faults = updated(faults, {"seed": seed}) if seed is not None else faults
    except FaultsError as e:
        raise click.ClickException(str(e)) from e
    retry = RetryPolicy(concurrency=webhook_concurrency, delay=webhook_delay_ms / 1000)
    options = SimOptions(
        webhook_url, secret, idempotency_window, faults, retry, answer_delay_ms / 1000
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    target = webhook_url or "nowhere (no --webhook-url)"
    click.echo(f"railsim listening on http://{host}:{port}, webhooks to {target}", err=True)
    import uvloop  # event-loop and socket work dominate; uvloop halves its cost

    uvloop.run(serve(options, host, port))
