"""`settle run` as a user runs it: the stack comes up, the demo batch is judged sound, and an
interrupt stops it with exit status 0 and no child process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tools.infra.procs import free_ports
from tools.run.topology import Ports

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
SETTLE = str(Path(sys.executable).with_name("settle"))
COUNT = 200


@pytest.fixture
async def database(infra: Servers) -> AsyncIterator[str]:
    """A fresh, unmigrated database: `settle run` migrates it."""
    async with scratch_database(infra.database_url, "settle_run_", migrated=False) as url:
        yield url


def children_of(pid: int) -> set[int]:
    """Processes whose parent is `pid`."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def settle_processes_on(ports: range) -> list[str]:
    """Command lines of `settle` processes that name one of `ports`."""
    lines = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().decode(errors="replace").split("\0")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if any(a.endswith("settle") for a in argv) and any(str(p) in argv for p in ports):
            lines.append(" ".join(argv))
    return lines


def start(args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as sink:
        return subprocess.Popen([SETTLE, *args], env=env, stdout=sink, stderr=subprocess.STDOUT)


async def test_run_serves_the_demo_and_stops_cleanly_on_interrupt(
    database: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    base = free_ports(Ports.SPAN)
    env = {
        **os.environ,
        "SETTLE_DATABASE_URL": database,
        "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SETTLE_TOPIC_PREFIX": unique("t") + ".",
        "SETTLE_RUN_DIR": str(tmp_path / "run"),
        "COLUMNS": "120",
    }
    out = tmp_path / "run.out"
    proc = start(["run", "--count", str(COUNT), "--ports-from", str(base)], env, out)
    try:
        deadline = time.monotonic() + 75
        while "serving;" not in out.read_text() and proc.poll() is None:
            assert time.monotonic() < deadline, out.read_text()
            await asyncio.sleep(0.5)
        text = out.read_text()
        assert proc.poll() is None, text
        children = children_of(proc.pid)
        # ledger, 2 relays, inbox, reconciler, console, railsim, banksim
        assert len(children) == 8, text
        # An operator's shell holds the printed operator API and a token, nothing else.
        api = re.search(r"operator API: (http://\S+)", text)
        assert api, text
        shell = {"PATH": os.environ["PATH"], "SETTLE_OPERATOR_API": api[1]}
        listed = await asyncio.to_thread(
            subprocess.run,
            [SETTLE, "approvals", "policy", "--json"],
            env=shell | {"SETTLE_OPERATOR_TOKEN": "ops-local-token"},
            capture_output=True,
            timeout=30,
        )
        assert listed.returncode == 0, listed
        assert json.loads(listed.stdout)["two_person"] is False
        proc.send_signal(signal.SIGINT)
        code = await asyncio.to_thread(proc.wait, 20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out.read_text()
    assert code == 0, text
    assert "all guarantees hold" in text and "demo ok" in text, text
    # The account holds other systems' money too (a real account's habits): reconciliation
    # leaves it out of scope, counted, and finds no open break.
    flat = " ".join(text.split())  # the line may wrap
    reconciled = re.search(r"reconciled: run \d+ completed, 0 open breaks, 0 pending[^:]*", flat)
    assert reconciled and re.search(r"out of scope \([^)]*\): [^;]*\d+ transfers", flat), text
    # Offered at a steady rate, and the settlements the simulator sent a fault set apart
    assert "offered at 100/s; booked over" in text, text
    whole = re.search(r"accepted -> paid, whole batch \((\d+) paid\): p50 (\d+) ms", text)
    clean = re.search(r"accepted -> paid, met no fault \((\d+) paid\): p50 (\d+) ms", text)
    assert whole and clean, text
    assert 0 < int(clean[1]) < int(whole[1]) <= COUNT, text
    assert int(clean[2]) < 5000, text  # not a queue behind a held rail call
    assert "met a fault at the rail" in text, text
    assert "on sepa" in text and "on sim" in text, text  # the batch, paid over both rails
    assert "all services stopped" in text
    assert not [pid for pid in children if alive(pid)]
    assert settle_processes_on(range(base, base + Ports.SPAN)) == []
    logs = {p.name for p in (tmp_path / "run" / "logs" / f"ports-{base}").iterdir()}
    assert logs == {
        "ledger.log",
        "relay-1.log",
        "relay-2.log",
        "inbox.log",
        "railsim.log",
        "banksim.log",
        "reconciler.log",
        "console.log",
    }
    conn = await asyncpg.connect(asyncpg_dsn(database))
    try:
        booked = await conn.fetchval("SELECT count(*) FROM settlements")
        by_sepa = await conn.fetchval("SELECT count(*) FROM settlements WHERE rail = 'sepa'")
        files = await conn.fetchval("SELECT count(*) FROM bank_files WHERE status = 'uploaded'")
        # every file the bank was sent passed its XSD check: none refused (FF01)
        refused = await conn.fetchval("SELECT count(*) FROM bank_files WHERE status <> 'uploaded'")
    finally:
        await conn.close()
    assert booked == COUNT  # retries and duplicates made no second settlement
    assert by_sepa > 0 and files > 0 and refused == 0  # its euro settlements went by SEPA
