"""`settle rail statement --rail stripe --from T --to T --out DIR`: Stripe's statement of
[from, to) through its Reporting API and the `stripe` library: a run of
`balance_change_from_activity.itemized.3` (default columns, with `connected_account_id` and
`transfer_metadata[settlement_id]`) and one of `payouts.itemized.3`, awaited, their files
fetched from the library's `files` base address into DIR/<report type>.csv. `--rail sim` (the
default) asks the simulator the same. A `--to` past the reports' `data_available_end` is cut
to it (said on stderr). Against Stripe the files host is the library's own; against another
API base it is `--files-url`, else the host the run's file names in its `url`. Files are
renamed into place once whole. `--rail sepa` saves the bank's camt.053 statements
(`--date D --out FILE` one day's, `--out DIR` every one) and `settle rail files --rail sepa
--out DIR` every payment file the bank received (services/commands/rail_bank.py).
Exit status: 0 saved; 2 the rail refused, a run failed, or the rail could not be reached.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, date, datetime
from pathlib import Path
from typing import NoReturn

import click
import stripe

from services.adapters.stripe.address import SIMULATOR_API
from services.adapters.stripe.report_types import (
    BALANCE_COLUMNS_ASKED,
    BALANCE_REPORT,
    PAYOUTS_REPORT,
)
from services.commands.common import pinned_rail_url
from services.domain.errors import ConfigError
from services.platform.settings import load_settings

TIMES = click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"])
TIMEOUT = 60.0  # seconds: a day's report file is one long answer
UNREADABLE = 2
# The columns asked for per report type; None: the type's default columns
REPORTS: dict[str, tuple[str, ...] | None] = {
    BALANCE_REPORT: BALANCE_COLUMNS_ASKED,
    PAYOUTS_REPORT: None,
}
RUN_WAIT = 900.0  # seconds a run may take (Stripe's take minutes)
POLL_FIRST, POLL_MAX = 0.2, 5.0  # seconds between looks at a run: doubling, then capped


class ReportsUnavailable(Exception):
    """The rail refused a run, a run failed, or its file could not be fetched."""


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
    help="A directory (replaced files once whole); sepa with --date: a file.",
)
@click.option("--rail-url", default=None, help="The rail's API (default STRIPE_API_BASE).")
@click.option(
    "--files-url",
    default=None,
    help="The files host report files are fetched from (default: the one the run names).",
)
def statement(
    rail_name: str,
    start: datetime | None,
    end: datetime | None,
    form: str | None,
    day: datetime | None,
    out: Path,
    rail_url: str | None,
    files_url: str | None,
) -> None:
    """Save the rail's statement: Stripe's reports of [--from, --to), or the bank's camt.053."""
    try:
        settings = load_settings()
        pinned_rail_url(settings, rail_url)
        pinned_rail_url(settings, files_url, "--files-url")
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    if rail_name == "sepa" or form == "camt.053":
        _bank_statements(settings.sepa_bank_url, out, day.date() if day else None)
        return
    if start is None or end is None:
        raise click.UsageError("--from and --to are needed for the Stripe rail's statement")
    api_base = rail_url or settings.stripe_api_base
    if api_base is None and rail_name == "sim":
        api_base = SIMULATOR_API
    key = settings.stripe_api_key.get_secret_value()
    interval = (_seconds(start), _seconds(end))
    try:
        out.mkdir(parents=True, exist_ok=True)
        saved = asyncio.run(_reports(key, api_base, files_url, interval, out))
    except (ReportsUnavailable, stripe.StripeError, OSError) as e:
        _fail(f"the reports could not be saved: {e}")
    for path in saved:
        click.echo(str(path))


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


async def _reports(
    key: str, api_base: str | None, files_url: str | None, interval: tuple[int, int], out: Path
) -> list[Path]:
    """Run both report types over `interval` and save their files into `out`; their paths."""
    http = stripe.HTTPXClient(timeout=TIMEOUT)
    client = _client(key, http, api_base, files_url)
    try:
        start, end = await _available(client, interval)
        runs = [
            await client.v1.reporting.report_runs.create_async(_run_params(t, start, end))
            for t in REPORTS
        ]
        saved = []
        for run in runs:
            done = await _finished(client, run.id)
            fetcher = client
            if files_url is None and api_base is not None and done.result is not None:
                # Not Stripe's own API: its files host is where the run's file says it is
                fetcher = _client(key, http, api_base, _files_base(done.result.url or ""))
            saved.append(await _save(fetcher, done, out / f"{done.report_type}.csv"))
        return saved
    finally:
        await http.close_async()  # type: ignore[no-untyped-call]


def _client(
    key: str, http: stripe.HTTPClient, api_base: str | None, files_base: str | None
) -> stripe.StripeClient:
    """Stripe's client at `api_base` and `files_base` (None: the library's own addresses)."""
    return stripe.StripeClient(
        key,
        base_addresses={
            "api": (api_base or stripe.DEFAULT_API_BASE).rstrip("/"),
            "files": (files_base or stripe.DEFAULT_UPLOAD_API_BASE).rstrip("/"),
        },
        max_network_retries=2,  # the library keys each POST, so a retried run is one run
        http_client=http,
    )


async def _available(client: stripe.StripeClient, interval: tuple[int, int]) -> tuple[int, int]:
    """`interval` with its end cut to the data the report types hold; ReportsUnavailable if
    none of it is there yet."""
    start, end = interval
    ends = [
        (await client.v1.reporting.report_types.retrieve_async(t)).data_available_end
        for t in REPORTS
    ]
    available = min(ends)
    if end > available:
        click.echo(
            f"settle rail statement: the rail's reports hold data up to {_utc(available)};"
            f" --to cut from {_utc(end)} to it",
            err=True,
        )
        end = available
    if start >= end:
        raise ReportsUnavailable(f"no data from {_utc(start)} is available yet")
    return start, end


def _run_params(
    report_type: str, start: int, end: int
) -> stripe.params.reporting.ReportRunCreateParams:
    parameters: stripe.params.reporting.ReportRunCreateParamsParameters = {
        "interval_start": start,
        "interval_end": end,
    }
    columns = REPORTS[report_type]
    if columns is not None:
        parameters["columns"] = list(columns)
    return {"report_type": report_type, "parameters": parameters}


async def _finished(client: stripe.StripeClient, run_id: str) -> stripe.reporting.ReportRun:
    """The run once it succeeded; ReportsUnavailable if it failed or took too long."""
    pause, waited = POLL_FIRST, 0.0
    while True:
        run = await client.v1.reporting.report_runs.retrieve_async(run_id)
        if run.status == "succeeded" and run.result is not None:
            return run
        if run.status == "failed":
            raise ReportsUnavailable(f"the {run.report_type} run {run.id} failed: {run.error}")
        if waited >= RUN_WAIT:
            raise ReportsUnavailable(f"the {run.report_type} run {run.id} took over {RUN_WAIT:g} s")
        await asyncio.sleep(pause)
        waited, pause = waited + pause, min(pause * 2, POLL_MAX)


def _files_base(url: str) -> str:
    """The files host's base address in a file's `url` (everything before /v1/files/)."""
    base, found, _ = url.partition("/v1/files/")
    if not found or not base.startswith(("http://", "https://")):
        raise ReportsUnavailable(f"the run's file names no files host: {url!r}")
    return base


async def _save(client: stripe.StripeClient, run: stripe.reporting.ReportRun, path: Path) -> Path:
    """Stream the run's file from the files host to `path`, renamed onto it once whole."""
    assert run.result is not None  # a succeeded run has its file
    partial = path.with_name(path.name + ".partial")
    try:
        # The library has no typed call for a file's contents; its streamed request on the
        # `files` base address is what it uses for other downloads (a quote's PDF)
        answer = await client.v1.files._request_stream_async(
            "get", f"/v1/files/{run.result.id}/contents", base_address="files"
        )
        with partial.open("wb") as file:
            async for chunk in answer.stream():
                file.write(chunk)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
    return path


def _utc(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(moment: datetime) -> int:
    """Unix seconds of a time given without a zone, read as UTC."""
    return int(moment.replace(tzinfo=moment.tzinfo or UTC).timestamp())


def _fail(detail: str) -> NoReturn:
    click.echo(f"settle rail statement: {detail}", err=True)
    raise SystemExit(UNREADABLE)
