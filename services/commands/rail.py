"""`settle rail statement --from T --to T --out FILE`: save the rail simulator's statement of
[from, to) (Stripe's itemized balance change report, CSV) for `settle reconcile --statement`.
`--rail sepa` saves the bank's camt.053 statements instead (`--date D --out FILE` one day's,
`--out DIR` every one), and `settle rail files --rail sepa --out DIR` every payment file the
bank received, as uploaded (services/commands/rail_bank.py).

The body is streamed to a file beside FILE and renamed onto it once whole, so a failed
download never leaves a partial statement behind. Exit status: 0 saved, 2 the rail refused
or could not be reached.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import NoReturn

import click
import httpx

from services.adapters.stripe.address import SIMULATOR_API
from services.domain.errors import ConfigError
from services.platform.settings import load_settings

STATEMENT_PATH = "/v1/reporting/statement"
TIMES = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"])
TIMEOUT = 60.0  # seconds: a day's statement is one long answer
UNREADABLE = 2


@click.group()
def rail() -> None:
    """What the rail says, fetched from it."""


RAILS = click.Choice(["sim", "stripe", "sepa"])


@rail.command()
@click.option("--rail", "rail_name", type=RAILS, default="sim", show_default=True)
@click.option("--from", "start", type=TIMES, default=None, help="Start (UTC), inclusive.")
@click.option("--to", "end", type=TIMES, default=None, help="End (UTC), exclusive.")
@click.option(
    "--format",
    "form",
    type=click.Choice(["csv", "camt.053"]),
    default=None,
    help="csv (Stripe's report) or camt.053 (the bank's); the rail's own by default.",
)
@click.option(
    "--date",
    "day",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    default=None,
    help="sepa: the business day whose statement to save (to the file --out).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Where to save it (replaced once whole); sepa without --date: a directory.",
)
@click.option("--rail-url", default=None, help="The simulator (default STRIPE_API_BASE).")
def statement(
    rail_name: str,
    start: datetime | None,
    end: datetime | None,
    form: str | None,
    day: datetime | None,
    out: Path,
    rail_url: str | None,
) -> None:
    """Save the rail's statement: Stripe's of [--from, --to), or the bank's camt.053."""
    try:
        settings = load_settings()
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    if rail_name == "sepa" or form == "camt.053":
        _bank_statements(settings.sepa_bank_url, out, day.date() if day else None)
        return
    if start is None or end is None:
        raise click.UsageError("--from and --to are needed for the Stripe rail's statement")
    base = (rail_url or settings.stripe_api_base or SIMULATOR_API).rstrip("/")
    params = {"interval_start": _seconds(start), "interval_end": _seconds(end)}
    partial = out.with_name(out.name + ".partial")
    headers = {"Authorization": f"Bearer {settings.stripe_api_key.get_secret_value()}"}
    try:
        with httpx.stream(
            "GET", base + STATEMENT_PATH, params=params, headers=headers, timeout=TIMEOUT
        ) as answer:
            if answer.status_code != httpx.codes.OK:
                answer.read()
                _fail(f"the rail answered {answer.status_code}: {answer.text}")
            with partial.open("wb") as file:
                for chunk in answer.iter_bytes():
                    file.write(chunk)
    except (httpx.HTTPError, OSError) as e:
        partial.unlink(missing_ok=True)
        _fail(f"the statement could not be saved: {e}")
    os.replace(partial, out)
    click.echo(f"statement of {start.isoformat()} .. {end.isoformat()} saved to {out}")


@rail.command()
@click.option("--rail", "rail_name", type=click.Choice(["sepa"]), required=True)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="A directory."
)
def files(rail_name: str, out: Path) -> None:
    """Save every payment file the bank received, byte for byte as uploaded."""
    from services.commands.rail_bank import fetch_files, save
    from services.domain.rail import RailReadError

    try:
        settings = load_settings()
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    try:
        saved = save(out, asyncio.run(fetch_files(settings.sepa_bank_url)), one_file=False)
    except (RailReadError, OSError) as e:
        _fail(f"the files could not be saved: {e}")
    click.echo(f"{len(saved)} payment files saved to {out}")


def _bank_statements(url: str, out: Path, day: date | None) -> None:
    from services.commands.rail_bank import fetch_statements, save
    from services.domain.rail import RailReadError

    try:
        saved = save(out, asyncio.run(fetch_statements(url, day)), one_file=day is not None)
    except (RailReadError, OSError) as e:
        _fail(f"the statements could not be saved: {e}")
    if day is not None and not saved:
        _fail(f"the bank has issued no statement of {day.isoformat()}")
    click.echo(f"{len(saved)} camt.053 statements saved to {out}")


def _seconds(moment: datetime) -> int:
    """Unix seconds of a time given without a zone, read as UTC."""
    return int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp())


def _fail(detail: str) -> NoReturn:
    click.echo(f"settle rail statement: {detail}", err=True)
    raise SystemExit(UNREADABLE)
