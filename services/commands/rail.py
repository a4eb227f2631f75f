"""`settle rail statement --from T --to T --out FILE`: save the rail simulator's statement of
[from, to) (Stripe's itemized balance change report, CSV) for `settle reconcile --statement`.

The body is streamed to a file beside FILE and renamed onto it once whole, so a failed
download never leaves a partial statement behind. Exit status: 0 saved, 2 the rail refused
or could not be reached.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
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


@rail.command()
@click.option("--from", "start", type=TIMES, required=True, help="Start (UTC), inclusive.")
@click.option("--to", "end", type=TIMES, required=True, help="End (UTC), exclusive.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to save the CSV (replaced once the whole statement is in).",
)
@click.option("--rail-url", default=None, help="The simulator (default STRIPE_API_BASE).")
def statement(start: datetime, end: datetime, out: Path, rail_url: str | None) -> None:
    """Save the statement of the balance transactions created in [--from, --to) to --out."""
    try:
        settings = load_settings()
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
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


def _seconds(moment: datetime) -> int:
    """Unix seconds of a time given without a zone, read as UTC."""
    return int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp())


def _fail(detail: str) -> NoReturn:
    click.echo(f"settle rail statement: {detail}", err=True)
    raise SystemExit(UNREADABLE)
