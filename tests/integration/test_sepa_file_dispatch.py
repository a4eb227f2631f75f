"""The SEPA rail's file dispatcher on the real PostgreSQL, against a scripted bank that, like
a real one, takes a MsgId once and deduplicates by nothing else: each settlement is in one
file, stored before it is uploaded, and paid once through lost answers, a refused file and
a relay that loses its lease mid-upload."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from services.adapters.sepa.bank import Upload
from services.adapters.sepa.pain001 import Debtor
from services.adapters.sepa.pain001_read import read_pain001
from services.adapters.sepa.xsd import check_schema
from services.domain.rail import RailOutcome
from services.domain.sepa import end_to_end_id
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.relay.bank_files import FileDispatcher, FilePolicy
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS

pytestmark = [pytest.mark.integration, pytest.mark.money]

FAST = DispatchPolicy(backoff_base=0.0, max_attempts=3, lease_seconds=30.0, call_seconds=5.0)
DEBTOR = Debtor("settle platform", "DE89370400440532013000")
IBAN = "FR1420041010050500013M02606"
NOON = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)  # a Wednesday, before the 15:00 CET cut-off


class ScriptedBank:
    """A bank that answers uploads from a script: `take` (201), `lose` (takes the file, the
    answer is lost) or `refuse` (400 FF01, takes nothing); a MsgId it holds gets DU01."""

    def __init__(self, script: list[str]) -> None:
        self.script = script
        self.files: dict[str, bytes] = {}
        self.uploads: list[str] = []

    async def upload(self, content: bytes) -> Upload:
        msg_id = read_pain001(content).msg_id
        self.uploads.append(msg_id)
        if msg_id in self.files:
            return Upload(RailOutcome.ACCEPTED, f"f-{msg_id}", "DU01: the bank has it", 409)
        step = self.script.pop(0) if self.script else "take"
        if step == "refuse":
            return Upload(RailOutcome.REFUSED, detail="FF01: invalid file format", status=400)
        self.files[msg_id] = content
        if step == "lose":
            return Upload(RailOutcome.AMBIGUOUS, detail="answer lost", status=504)
        return Upload(RailOutcome.ACCEPTED, f"f-{msg_id}", "taken", 201)

    def debits(self) -> Counter[str]:
        return Counter(
            t.end_to_end_id for f in self.files.values() for t in read_pain001(f).transfers
        )


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    # A database of its own: a dispatcher files every pending SEPA instruction it can see.
    async with scratch_database(infra.database_url, "settle_files_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
        yield pool
        await pool.close()


async def accept_sepa(pool: asyncpg.Pool, count: int, payee: str = "Zoë Müller") -> list[str]:
    tenant = unique("t")
    requests = []
    for n in range(count):
        body = {
            "reference": unique("ref-"),
            "payee": f"{payee} {n}",
            "destination": IBAN,
            "amount": 1_000 + n,
            "currency": "EUR",
            "rail": "sepa",
        }
        requests.append(parse_settlement_body(tenant, unique("key-"), json.dumps(body).encode()))
    results = await Ledger(pool, Books(WINDOWS)).accept_many(requests)
    return [str(json.loads(r.body)["id"]) for r in results]


def dispatcher(
    pool: asyncpg.Pool, bank: ScriptedBank, policy: DispatchPolicy = FAST
) -> FileDispatcher:
    async def noon() -> datetime:
        return NOON

    return FileDispatcher(
        pool,
        bank,  # type: ignore[arg-type]
        create_metrics(),
        unique("w"),
        FilePolicy(DEBTOR),
        noon,
        policy,
    )


async def states(pool: asyncpg.Pool, sids: list[str]) -> dict[str, tuple[str, str, str | None]]:
    rows = await pool.fetch(
        """SELECT s.id::text AS sid, s.status, r.status AS instruction, r.rail_reference
             FROM settlements s JOIN rail_instructions r ON r.settlement_id = s.id
            WHERE s.id = ANY($1::uuid[])""",
        sids,
    )
    return {r["sid"]: (r["status"], r["instruction"], r["rail_reference"]) for r in rows}


async def test_a_file_is_stored_valid_then_taken_and_each_settlement_submitted(
    pool: asyncpg.Pool,
) -> None:
    sids = await accept_sepa(pool, 3)
    bank = ScriptedBank(["take"])
    d = dispatcher(pool, bank)
    msg_id = await d.build()
    assert msg_id is not None
    stored = await pool.fetchrow("SELECT * FROM bank_files WHERE msg_id = $1", msg_id)
    check_schema(bytes(stored["content"]))  # pain.001.001.09, by the official XSD
    assert (stored["status"], stored["transactions"], stored["control_sum"]) == ("built", 3, 3_003)
    assert {s[0] for s in (await states(pool, sids)).values()} == {"dispatching"}

    assert await d.upload_due() == 1
    assert bank.files[msg_id] == bytes(stored["content"])  # uploaded exactly as stored
    transfers = read_pain001(bank.files[msg_id]).transfers
    assert {t.creditor_name for t in transfers} == {f"Zoe Muller {n}" for n in range(3)}
    assert {t.execution_date.isoformat() for t in transfers} == {"2026-12-02"}
    assert await states(pool, sids) == {
        sid: ("submitted", "transferred", end_to_end_id(sid)) for sid in sids
    }
    assert await d.build() is None  # nothing is put in a second file


async def test_a_lost_answer_is_resolved_by_the_same_file_and_pays_once(
    pool: asyncpg.Pool,
) -> None:
    sids = await accept_sepa(pool, 2)
    bank = ScriptedBank(["lose"])
    d = dispatcher(pool, bank)
    msg_id = await d.build()
    assert await d.upload_due() == 1  # taken, answer lost: the file waits, built
    status = await pool.fetchval("SELECT status FROM bank_files WHERE msg_id = $1", msg_id)
    assert status == "built"
    assert await d.upload_due() == 1  # the same bytes again: DU01, the bank has it
    assert bank.uploads == [msg_id, msg_id]
    assert bank.debits() == Counter({end_to_end_id(sid): 1 for sid in sids})
    assert {s[:2] for s in (await states(pool, sids)).values()} == {("submitted", "transferred")}


async def test_a_relay_that_lost_its_lease_mid_upload_records_nothing(
    pool: asyncpg.Pool,
) -> None:
    sids = await accept_sepa(pool, 2)
    bank = ScriptedBank([])
    stale, successor = dispatcher(pool, bank), dispatcher(pool, bank)
    msg_id = await stale.build()
    claimed = await pool.fetchrow(
        "UPDATE bank_files SET fence = fence + 1, lease_until = now() + interval '30 s' "
        "WHERE msg_id = $1 RETURNING fence, content, attempts",
        msg_id,
    )
    # The successor takes the lease over once it ran out, uploads and records.
    await pool.execute("UPDATE bank_files SET lease_until = now() - interval '1 s'")
    assert await successor.upload_due() == 1
    # The stale holder's upload goes out late: the bank has it (DU01), and the fence refuses
    # its record.
    upload = await bank.upload(bytes(claimed["content"]))
    await stale._taken(msg_id, int(claimed["fence"]), upload)
    refused = stale.metrics.registry.get_sample_value(
        "settle_relay_fence_rejections_total", {"rail": "sepa"}
    )
    assert refused == 1
    assert bank.debits() == Counter({end_to_end_id(sid): 1 for sid in sids})
    assert {s[:2] for s in (await states(pool, sids)).values()} == {("submitted", "transferred")}


async def test_a_file_the_bank_refuses_fails_its_settlements_with_the_reason(
    pool: asyncpg.Pool,
) -> None:
    sids = await accept_sepa(pool, 2)
    bank = ScriptedBank(["refuse"])
    d = dispatcher(pool, bank)
    msg_id = await d.build()
    assert await d.upload_due() == 1
    assert await pool.fetchval("SELECT status FROM bank_files WHERE msg_id = $1", msg_id) == (
        "refused"
    )
    assert {s[:2] for s in (await states(pool, sids)).values()} == {("failed", "failed")}
    reasons = await pool.fetch("SELECT reason FROM settlements WHERE id = ANY($1::uuid[])", sids)
    assert all("FF01" in r["reason"] for r in reasons)
    assert bank.debits() == Counter()


async def test_a_transfer_that_cannot_be_written_fails_alone_and_the_rest_are_filed(
    pool: asyncpg.Pool,
) -> None:
    # Admission refuses such a payee; one booked before that rule must not hold up a file.
    good = await accept_sepa(pool, 2)
    bad = await accept_sepa(pool, 1, payee="Дмитрий")
    bank = ScriptedBank([])
    d = dispatcher(pool, bank)
    msg_id = await d.build()
    assert msg_id is not None
    assert await pool.fetchval(
        "SELECT array_agg(settlement_id::text ORDER BY settlement_id) FROM rail_instructions "
        "WHERE bank_file = $1",
        msg_id,
    ) == sorted(good)
    (status, reason) = await pool.fetchrow(
        "SELECT status, reason FROM settlements WHERE id = $1::uuid", bad[0]
    )
    assert status == "failed" and "cannot be paid by SEPA credit transfer" in reason
