"""`settle check [--json] [--wait-quiet S] [--rail-url URL] [--page-size N]`: judge every
guarantee, read-only, N settlements at a time.

Exit status: 0 every guarantee holds, 1 one or more is broken, 2 a source (PostgreSQL, Kafka,
the rail) or the configuration could not be read, so there is no verdict.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console

from services.adapters.kafka.access import kafka_access
from services.adapters.stripe.address import SIMULATOR_API
from services.contracts.topics import EVENTS
from services.domain.errors import ConfigError
from services.platform.config import RailKind
from services.platform.service_settings import Settings
from services.platform.settings import load_settings
from tools.check.errors import SourceUnavailable

if TYPE_CHECKING:
    from tools.check.rail import EffectSource

HOLDS, BROKEN, NO_VERDICT = 0, 1, 2


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@click.option(
    "--wait-quiet",
    "wait_quiet_s",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0),
    help="First wait up to S seconds for in-flight work to finish.",
)
@click.option(
    "--rail-url",
    default=None,
    help="The rail's API base (default STRIPE_API_BASE, else the local simulator).",
)
@click.option(
    "--outbox-bound",
    "outbox_bound_s",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds after which an unpublished outbox row counts as lost.",
)
@click.option(
    "--inbox-bound",
    "inbox_bound_s",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds after which a webhook still unapplied counts as lost.",
)
@click.option(
    "--page-size",
    default=10_000,
    show_default=True,
    type=click.IntRange(1),
    help="Settlements read and judged at a time; the check's memory follows it.",
)
def check(
    as_json: bool,
    wait_quiet_s: float,
    rail_url: str | None,
    outbox_bound_s: float,
    inbox_bound_s: float,
    page_size: int,
) -> None:
    """Check the guarantees over PostgreSQL, the events topic and the rail; changes nothing."""
    from tools.check.report import as_json as report_json
    from tools.check.report import print_table
    from tools.check.run import CheckOptions, run_check

    try:
        settings = load_settings()
        kafka = kafka_access(settings)
    except ConfigError as e:
        _fail(as_json, "config", str(e))
    options = CheckOptions(wait_quiet_s, outbox_bound_s, inbox_bound_s, page_size=page_size)
    try:
        report = asyncio.run(
            run_check(
                settings.database_url,
                kafka,
                settings.topic(EVENTS),
                effect_source(settings, rail_url),
                options,
            )
        )
    except SourceUnavailable as e:
        _fail(as_json, e.source, e.detail)
    except ValueError as e:
        _fail(as_json, "config", str(e))
    if as_json:
        click.echo(json.dumps(report_json(report), sort_keys=False))
    else:
        print_table(report, Console())
    raise SystemExit(HOLDS if report.ok else BROKEN)


def effect_source(settings: Settings, rail_url: str | None) -> EffectSource:
    """The effects at every rail driven here: Stripe's list API for stripe, the simulator's
    count for sim, the bank's count of debits for sepa."""
    from tools.check.rail import SimulatorEffects, StripeEffects
    from tools.check.rail_bank import AllRails, BankEffects

    base = rail_url or settings.stripe_api_base
    sources: list[EffectSource] = []
    if settings.api_rail is RailKind.STRIPE:
        sources.append(StripeEffects(settings.stripe_api_key.get_secret_value(), api_base=base))
    elif settings.api_rail is RailKind.SIM:
        sources.append(SimulatorEffects(base or SIMULATOR_API))
    if RailKind.SEPA in settings.rails:
        sources.append(BankEffects(settings.sepa_bank_url))
    return sources[0] if len(sources) == 1 else AllRails(sources)


def _fail(as_json: bool, source: str, detail: str) -> NoReturn:
    from tools.check.report import source_error_json

    if as_json:
        click.echo(json.dumps(source_error_json(source, detail)))
    else:
        click.echo(f"settle check: cannot read {source}: {detail}", err=True)
    raise SystemExit(NO_VERDICT)
