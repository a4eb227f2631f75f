"""`settle banksim`: run the bank simulator."""

from __future__ import annotations

import logging
from datetime import date, datetime
from pathlib import Path

import click

from banksim.app import BankOptions, serve
from banksim.errors import FaultsError
from banksim.faults import PROFILES, profile, updated


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=12112, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--day-seconds",
    default=20.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Wall-clock seconds one business day lasts.",
)
@click.option(
    "--state-dir",
    default=".run/banksim",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the bank keeps its state; a restart over it continues where it stopped.",
)
@click.option(
    "--fault-profile", default="none", show_default=True, type=click.Choice(sorted(PROFILES))
)
@click.option("--seed", default=None, type=int, help="Seed of the fault dice (default: 0).")
@click.option(
    "--start-date",
    default=None,
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="The first business date, on the first start only (default: today).",
)
def banksim(
    host: str,
    port: int,
    day_seconds: float,
    state_dir: Path,
    fault_profile: str,
    seed: int | None,
    start_date: datetime | None,
) -> None:
    """Run the bank simulator: a SEPA bank's host-to-host file API, statements, faults."""
    try:
        faults = profile(fault_profile)
        faults = updated(faults, {"seed": seed}) if seed is not None else faults
    except FaultsError as e:
        raise click.ClickException(str(e)) from e
    first = start_date.date() if start_date is not None else date.today()
    options = BankOptions(state_dir, day_seconds, first, faults)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    click.echo(
        f"banksim listening on http://{host}:{port}, state in {state_dir},"
        f" a business day every {day_seconds:g}s, faults: {fault_profile}",
        err=True,
    )
    import uvloop  # as railsim: the event loop's own work dominates, and uvloop halves it

    uvloop.run(serve(options, host, port))
