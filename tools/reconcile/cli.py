"""`settle reconcile [--json] [--day D] [--grace S] [--rail-url URL]`: one reconciliation run.

Exit status: 0 no open break, 1 open breaks, 2 a source (the rail, PostgreSQL) or the
configuration could not be read: an unreadable rail is never "no breaks".
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, NoReturn

import click
import uvloop

from services.shared.config import Settings, load_settings
from services.shared.domain.breaks import DEFAULT_GRACE_SECONDS
from services.shared.errors import ConfigError, StoreUnavailable
from tools.check.cli import SIMULATOR_API

if TYPE_CHECKING:
    from services.reconcile.engine import Outcome


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--day",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="Reconcile one whole UTC day (end of day) instead of since the last run.",
)
@click.option(
    "--grace",
    default=DEFAULT_GRACE_SECONDS,
    show_default=True,
    type=click.IntRange(0),
    help="Seconds an item handed to the rail may lag before it is a break, not pending.",
)
@click.option(
    "--rail-url",
    default=None,
    help="The rail's API base (default STRIPE_API_BASE, else the local simulator).",
)
def reconcile(as_json: bool, day: datetime | None, grace: int, rail_url: str | None) -> None:
    """Compare the ledger with the rail over a window, record the run and its breaks."""
    from tools.reconcile.output import exit_status, print_text, run_document

    try:
        settings = load_settings()
    except ConfigError as e:
        _fail(as_json, "config", str(e))
    try:
        # uvloop: a run's rail pages and cursor batches are mostly socket reads and writes
        outcome = uvloop.run(_run(settings, day.date() if day else None, grace, rail_url))
    except StoreUnavailable as e:
        _fail(as_json, "postgresql", str(e))
    if as_json:
        click.echo(json.dumps(run_document(outcome), sort_keys=True))
    else:
        print_text(outcome)
    raise SystemExit(exit_status(outcome))


async def _run(settings: Settings, day: date | None, grace: int, rail_url: str | None) -> Outcome:
    from services.reconcile import store, windows
    from services.reconcile.engine import reconcile as run_once
    from services.reconcile.model import RunKind
    from services.reconcile.rail_source import RailSource
    from services.shared.database import create_pool

    pool = await create_pool(settings, max_size=2)
    rail = RailSource(
        settings.stripe_api_key, api_base=rail_url or settings.stripe_api_base or SIMULATOR_API
    )
    try:
        if day is not None:
            window = windows.end_of_day(day)
        else:
            last = await store.last_completed(pool, RunKind.INTRADAY)
            window = windows.intraday(last, datetime.now(UTC))
        return await run_once(pool, rail, window, grace=grace)
    finally:
        await rail.aclose()
        await pool.close()


def _fail(as_json: bool, source: str, detail: str) -> NoReturn:
    from tools.reconcile.output import SOURCE_UNREADABLE

    if as_json:
        click.echo(json.dumps({"ok": False, "error": {"source": source, "detail": detail}}))
    else:
        click.echo(f"settle reconcile: cannot read {source}: {detail}", err=True)
    raise SystemExit(SOURCE_UNREADABLE)
