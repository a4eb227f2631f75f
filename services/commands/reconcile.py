"""`settle reconcile [--json] [--day D] [--grace S] [--rail-url URL] [--statement FILE]...
[--no-heal] [--rail R] [--operator NAME]`: one reconciliation run, against the rail's API or
Stripe's report-run files of it (`--statement` once per file); status drifts the rail proves
are healed through the inbox unless `--no-heal` makes the run read-only (a run against a
statement heals nothing: a file is no live proof; the API is read only for the transfers the
files reverse but list from before their period). `--rail sepa` reconciles the SEPA rail's
bank account against the bank's camt.053 statements (or `--statement` one camt.053 file)
instead (services/commands/reconcile_bank.py). A run started here heals as the operator who started
it (`--operator`, else the login name), never as the reconciler service.

Exit status: 0 no open break, 1 open breaks, 2 a source (the rail, PostgreSQL) or the
configuration could not be read: an unreadable rail is never "no breaks".
"""

from __future__ import annotations

import getpass
import json
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
import uvloop

from services.adapters.stripe.address import rail_api_base
from services.commands.common import pinned_rail_url
from services.domain.errors import ConfigError, StoreUnavailable
from services.platform.clock import utc_now
from services.platform.service_settings import Settings
from services.platform.settings import load_settings
from services.reconcile.errors import StatementUnreadable

if TYPE_CHECKING:
    from services.reconcile.lineage import Ref
    from services.reconcile.outcome import Outcome

# Seconds a call to the rail's API may take in a run against report files: it is only asked
# for the transfers the files reverse but list from before their period.
STATEMENT_API_TIMEOUT = 10.0


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
    default=None,
    type=click.IntRange(0),
    help="Seconds an item handed to the rail may lag before it is a break, not pending "
    "(default SETTLE_RECONCILE_GRACE_SECONDS, as the reconciler service, else 3600).",
)
@click.option(
    "--rail-url",
    default=None,
    help="The rail's API base (default STRIPE_API_BASE, else the local simulator).",
)
@click.option(
    "--statement",
    "statements",
    type=click.Path(dir_okay=False, path_type=Path),
    multiple=True,
    help="Reconcile against Stripe's report-run files instead of the rail's API, once per file "
    "(balance_change_from_activity.itemized.3, payouts.itemized.3; CSV), over --day or else "
    "the span of their lines.",
)
@click.option(
    "--rail",
    "rail_name",
    type=click.Choice(["stripe", "sim", "sepa"]),
    default=None,
    help="The rail to reconcile (default: the one that speaks Stripe's API); sepa reads the "
    "bank's camt.053 statements, or --statement a camt.053 file.",
)
@click.option(
    "--no-heal",
    "read_only",
    is_flag=True,
    help="Heal nothing: report the status drifts the rail proves, leave them open.",
)
@click.option(
    "--operator",
    default=None,
    help="Who runs it: its heals are audited under this name (default: the login name).",
)
def reconcile(
    as_json: bool,
    day: datetime | None,
    grace: int | None,
    rail_url: str | None,
    statements: tuple[Path, ...],
    rail_name: str | None,
    read_only: bool,
    operator: str | None,
) -> None:
    """Compare the ledger with the rail over a window, record the run and its breaks."""
    from services.commands.reconcile_output import (
        exit_status,
        print_statement,
        print_text,
        run_document,
    )

    try:
        settings = load_settings()
        pinned_rail_url(settings, rail_url)
    except ConfigError as e:
        _fail(as_json, "config", str(e))
    grace = settings.reconcile_grace_seconds if grace is None else grace
    # A run started by hand heals as the person who started it, never as the service.
    actor = operator or getpass.getuser()
    if rail_name == "sepa":
        if len(statements) > 1:
            raise click.BadParameter(
                "--rail sepa reads one camt.053 file", param_hint="--statement"
            )
        statement = statements[0] if statements else None
        _bank(settings, statement, grace, read_only, actor, as_json)
    try:
        # uvloop: a run's rail pages and cursor batches are mostly socket reads and writes
        outcome, lineage, read = uvloop.run(
            _run(
                settings,
                day.date() if day else None,
                grace,
                rail_url,
                statements,
                heal=not read_only and not statements,
                lineage=as_json,
                actor=actor,
            )
        )
    except StoreUnavailable as e:
        _fail(as_json, "postgresql", str(e))
    except StatementUnreadable as e:
        _fail(as_json, "statement", str(e))
    if as_json:
        click.echo(json.dumps(run_document(outcome, lineage) | read, sort_keys=True))
    else:
        print_text(outcome)
        print_statement(read.get("statement"))
    raise SystemExit(exit_status(outcome))


async def _run(
    settings: Settings,
    day: date | None,
    grace: int,
    rail_url: str | None,
    statements: tuple[Path, ...],
    *,
    heal: bool,
    lineage: bool,
    actor: str,
) -> tuple[Outcome, dict[Ref, Any], dict[str, Any]]:
    """One run (its heals audited under `actor`): its outcome, the lineage of its breaks (if
    asked) and, against report files, what they held besides (`{"statement": ...}`)."""
    from services.adapters.postgres.database import create_pool
    from services.adapters.stripe.source import RailReader, RailSource
    from services.domain.reconciliation import RunKind
    from services.reconcile import store, windows
    from services.reconcile.engine import reconcile as run_once
    from services.reconcile.lineage import lineage_of
    from services.reconcile.statement_source import StatementSource

    rail: RailReader
    window: windows.Window | None
    sheet: StatementSource | None = None
    if statements:
        # Read first: a file that is neither report (or, without --day, has a line that
        # cannot be read) starts no run.
        rail = sheet = StatementSource.open(statements)
        window = sheet.window(day)
        sheet.api = RailSource(
            settings.stripe_api_key.get_secret_value(),
            api_base=rail_api_base(settings, rail_url),
            timeout=STATEMENT_API_TIMEOUT,
        )
    else:
        rail = RailSource(
            settings.stripe_api_key.get_secret_value(),
            api_base=rail_api_base(settings, rail_url),
        )
        window = windows.end_of_day(day) if day is not None else None
    pool = await create_pool(settings, max_size=2)
    try:
        if window is None:
            last = await store.last_completed(pool, RunKind.INTRADAY)
            window = windows.intraday(last, utc_now())
        outcome = await run_once(pool, rail, window, grace=grace, heal=heal, actor=actor)
        if sheet is not None and sheet.unreadable is not None:
            raise sheet.unreadable  # the run that read it is recorded failed, naming the line
        reported = [store.stored_key(b) for b in outcome.report().breaks] if lineage else []
        read = {"statement": sheet.summary()} if sheet is not None else {}
        return outcome, await lineage_of(pool, reported), read
    finally:
        await rail.aclose()
        await pool.close()


def _bank(
    settings: Settings,
    statement: Path | None,
    grace: int,
    read_only: bool,
    actor: str,
    as_json: bool,
) -> NoReturn:
    from services.commands.reconcile_bank import run_bank
    from services.commands.reconcile_output import exit_status, print_text, run_document
    from services.domain.rail import RailReadError

    try:
        outcome, lineage, read = uvloop.run(
            run_bank(settings, statement, grace, read_only=read_only, lineage=as_json, actor=actor)
        )
    except StoreUnavailable as e:
        _fail(as_json, "postgresql", str(e))
    except StatementUnreadable as e:
        _fail(as_json, "statement", str(e))
    except RailReadError as e:
        _fail(as_json, "bank", str(e))
    if as_json:
        click.echo(json.dumps(run_document(outcome, lineage) | {"read": read}, sort_keys=True))
    else:
        print_text(outcome)
    raise SystemExit(exit_status(outcome))


def _fail(as_json: bool, source: str, detail: str) -> NoReturn:
    from services.commands.reconcile_output import SOURCE_UNREADABLE

    if as_json:
        click.echo(json.dumps({"ok": False, "error": {"source": source, "detail": detail}}))
    else:
        click.echo(f"settle reconcile: cannot read {source}: {detail}", err=True)
    raise SystemExit(SOURCE_UNREADABLE)
