"""`settle railsim --account-activity realistic --data-dir DIR --files-port P`, a real process,
driven by Stripe's own library: report runs created, awaited and their files fetched from
the files host through the library's `files` base address; the process killed (SIGKILL)
and started again on the same directory, with everything it had answered still there; and
`settle rail statement --rail stripe` saving both reports. No PostgreSQL or Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import stripe

from tests.waiting import eventually
from tools.infra.procs import free_ports

SETTLE = str(Path(sys.executable).parent / "settle")
KEY = "sk_test_reports"
SID = "5b0c1d9e-0000-4000-8000-00000000c0de"
BALANCE = "balance_change_from_activity.itemized.3"
PAYOUTS = "payouts.itemized.3"
ASKED = ["balance_transaction_id", "reporting_category", "gross", "fee", "net", "source_id"]
ASKED += ["connected_account_id", "transfer_metadata[settlement_id]"]


@dataclass
class Served:
    """The simulator's addresses and data directory."""

    api: str
    files: str
    data: Path
    ports: tuple[int, int]


@contextlib.asynccontextmanager
async def simulator(served: Served, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`settle railsim` on `served`'s ports and directory until the block ends (or is killed)."""
    args = ["railsim", "--port", str(served.ports[0]), "--files-port", str(served.ports[1])]
    args += ["--data-dir", str(served.data), "--account-activity", "realistic"]
    args += ["--report-data-interval", "1"]
    args += ["--payout-pending-seconds", "0.2", "--payout-transit-seconds", "0.3"]
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            SETTLE, *args, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        async with httpx.AsyncClient() as http:

            async def healthy() -> bool:
                assert process.returncode is None, f"the simulator stopped; see {log}"
                with contextlib.suppress(httpx.HTTPError):
                    return (await http.get(f"{served.api}/healthz")).status_code == 200
                return False

            await eventually(healthy, within=20, what="the simulator to answer")
        yield process
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await process.wait()


@contextlib.asynccontextmanager
async def library(served: Served) -> AsyncIterator[stripe.StripeClient]:
    """Stripe's client, its `api` and `files` base addresses the simulator's."""
    http = stripe.HTTPXClient(timeout=10)
    try:
        yield stripe.StripeClient(
            KEY,
            base_addresses={"api": served.api, "files": served.files},
            max_network_retries=0,
            http_client=http,
        )
    finally:
        await http.close_async()  # type: ignore[no-untyped-call]


async def report(
    client: stripe.StripeClient, files: str, report_type: str, columns: list[str] | None = None
) -> tuple[str, str]:
    """Run `report_type` over what the rail holds, await it, and fetch its file's contents:
    the run's id and the CSV."""
    kind = await client.v1.reporting.report_types.retrieve_async(report_type)
    asked: stripe.params.reporting.ReportRunCreateParams = {"report_type": report_type}
    if columns is not None:  # else the type's default columns, and the data's whole span
        asked["parameters"] = {"columns": columns}
    run = await client.v1.reporting.report_runs.create_async(asked)
    assert run.status == "pending" and run.id.startswith("frr_")
    assert run.parameters.interval_end == kind.data_available_end

    async def done() -> stripe.reporting.ReportRun | None:
        now = await client.v1.reporting.report_runs.retrieve_async(run.id)
        return now if now.status == "succeeded" else None

    finished = await eventually(done, within=20, what=f"the {report_type} run", every=0.2)
    assert finished.result.url.startswith(f"{files}/v1/files/file_")
    return run.id, await contents(client, finished)


async def contents(client: stripe.StripeClient, run: stripe.reporting.ReportRun) -> str:
    """A succeeded run's file, from the files host, as the library streams a download."""
    assert run.result is not None
    answer = await client.v1.files._request_stream_async(
        "get", f"/v1/files/{run.result.id}/contents", base_address="files"
    )
    return (await answer.read_async()).decode()


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(text.splitlines()))


async def test_report_runs_a_kill_and_the_statement_command(tmp_path: Path) -> None:
    first = free_ports(2)
    ports = (first, first + 1)
    served = Served(f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", tmp_path, ports)
    log = tmp_path / "railsim.log"
    async with simulator(served, log) as process, library(served) as client:
        made = await _activity(client)
        balance_run = await report(client, served.files, BALANCE, columns=ASKED)
        payouts_run = await report(client, served.files, PAYOUTS)
        reports = dict([balance_run, payouts_run])
        balance, payouts = (rows(text) for text in reports.values())
        ours = [r for r in balance if r["transfer_metadata[settlement_id]"] == SID]
        assert [r["reporting_category"] for r in ours] == ["transfer"] + ["transfer_reversal"] * 3
        assert {r["connected_account_id"] for r in ours} == {"acct_partial3"}
        assert any(r["reporting_category"] == "charge" and r["fee"] != "0.00" for r in balance)
        assert all(r["reporting_category"] not in ("payout", "payout_reversal") for r in balance)
        (instant,) = [r for r in payouts if r["payout_id"] == made["payout"]]
        assert (instant["gross"], instant["fee"], instant["net"]) == ("-100.00", "1.00", "-101.00")
        latest = await client.v1.transfers.create_async(
            {"amount": 777, "currency": "usd", "destination": "acct_ok"},
            {"idempotency_key": "the-last-word"},
        )
        process.kill()  # SIGKILL right after the answer: nothing it answered may be lost
        await process.wait()
    async with simulator(served, log), library(served) as client:
        kept = await client.v1.transfers.retrieve_async(latest.id)
        assert (kept.amount, kept.currency) == (777, "usd")
        again = await client.v1.transfers.create_async(
            {"amount": 777, "currency": "usd", "destination": "acct_ok"},
            {"idempotency_key": "the-last-word"},
        )
        assert again.id == latest.id
        reversed_ = await client.v1.transfers.retrieve_async(made["transfer"])
        assert reversed_.amount_reversed == reversed_.amount and reversed_.reversed
        for run_id, text in reports.items():
            back = await client.v1.reporting.report_runs.retrieve_async(run_id)
            assert back.status == "succeeded" and await contents(client, back) == text
        await _statement_command(served, tmp_path / "statement")


async def _activity(client: stripe.StripeClient) -> dict[str, str]:
    """Settle's objects (a transfer reversed in three parts, an instant payout), then the
    account's own activity for a while; the reversals and the payout done."""
    transfer = await client.v1.transfers.create_async(
        {
            "amount": 1050,
            "currency": "eur",
            "destination": "acct_partial3",
            "transfer_group": SID,
            "metadata": {"settlement_id": SID},
        },
        {"idempotency_key": f"t-{SID}"},
    )
    assert transfer.transfer_group == SID
    payout = await client.v1.payouts.create_async(
        {"amount": 10_000, "currency": "eur", "destination": "acct_ok", "method": "instant"}
    )

    async def settled() -> bool:
        now = await client.v1.transfers.retrieve_async(transfer.id)
        paid = await client.v1.payouts.retrieve_async(payout.id)
        charges = await client.v1.charges.list_async({"limit": 1})
        return now.amount_reversed == 1050 and paid.status == "paid" and bool(charges.data)

    await eventually(settled, within=20, what="the reversals, the payout and a charge", every=0.2)
    await asyncio.sleep(1.1)  # the reports hold data up to the last whole second
    return {"transfer": transfer.id, "payout": payout.id}


async def _statement_command(served: Served, out: Path) -> None:
    """`settle rail statement --rail stripe` saves both reports with their columns."""
    today = datetime.now(UTC).date()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {"STRIPE_API_BASE": served.api, "STRIPE_API_KEY": KEY}
    args = ["rail", "statement", "--rail", "stripe", "--out", str(out)]
    args += ["--from", today.isoformat(), "--to", (today + timedelta(days=1)).isoformat()]
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        SETTLE, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    printed, complained = await process.communicate()
    assert process.returncode == 0, complained.decode()
    assert time.monotonic() - started < 30
    saved = [Path(line) for line in printed.decode().split()]
    assert saved == [out / f"{BALANCE}.csv", out / f"{PAYOUTS}.csv"]
    balance_header = saved[0].read_text().splitlines()[0].split(",")
    assert balance_header[-2:] == ["connected_account_id", "transfer_metadata[settlement_id]"]
    assert balance_header[:3] == ["balance_transaction_id", "created_utc", "created"]
    assert saved[1].read_text().startswith("payout_id,effective_at_utc,effective_at,currency,")
    assert b"--to cut" in complained  # the data ends before tomorrow
