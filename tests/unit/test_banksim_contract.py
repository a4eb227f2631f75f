"""What the bank simulator writes, settle's SEPA adapter reads: a file settle's own builder
writes is taken and paid once; every report the bank delivers validates against its official
XSD (pain.002.001.10 as services/adapters/sepa/schemas keeps it) and is read whole by the
adapter, saying what the bank meant: the statuses, the return and the balances."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import httpx
import pytest
import xmlschema

import services.adapters.sepa
from banksim.app import create_app
from banksim.bank import Bank
from banksim.clock import ManualClock
from banksim.faults import Faults
from banksim.payment_files import DEBTOR_IBAN, Transfer, one_transfer_file
from services.adapters.sepa.camt053 import StatementReport, closing_balance_agrees
from services.adapters.sepa.camt054 import NotificationReport
from services.adapters.sepa.pain001 import CreditTransfer, Debtor, build_pain001
from services.adapters.sepa.pain002 import PaymentStatus, StatusReport
from services.adapters.sepa.reports import read_report
from services.domain.sepa import end_to_end_id

MONDAY = date(2026, 1, 5)
PAIN002_XSD = Path(services.adapters.sepa.__file__).parent / "schemas" / "pain.002.001.10.xsd"


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    bank = Bank.open(tmp_path / "bank", ManualClock(), 20.0, MONDAY, Faults(charge=0.5))
    yield bank
    bank.close()


@pytest.fixture
async def client(bank: Bank) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(bank))
    async with httpx.AsyncClient(transport=transport, base_url="http://bank") as c:
        yield c


def settles_file(remittances: list[str]) -> tuple[bytes, list[str]]:
    """A pain.001 as settle writes it, one transfer per remittance; and their EndToEndIds."""
    ids = [end_to_end_id(str(uuid.uuid4())) for _ in remittances]
    transfers = [
        CreditTransfer(e2e, 1000 + n, "A creditor", "FR1420041010050500013M02606", text, MONDAY)
        for n, (e2e, text) in enumerate(zip(ids, remittances, strict=True))
    ]
    written = build_pain001(
        Debtor("settle platform", DEBTOR_IBAN),
        transfers,
        batch_booking=False,
        created_at=datetime(2026, 1, 5, 9, tzinfo=UTC),
    )
    return written.data, ids


async def test_settles_files_are_paid_once_and_every_report_reads_back_as_meant(
    client: httpx.AsyncClient,
) -> None:
    body, (paid, refused, returned) = settles_file(["inv 1", "reject:AC04", "return:MD07:2"])
    assert (await client.post("/v1/files", content=body)).status_code == 201
    again = await client.post("/v1/files", content=body)
    assert (again.status_code, again.json()["code"]) == (409, "DU01")
    miscounted = one_transfer_file("MSG-AM18", Transfer("E2E-AM18")).replace(
        b"<NbOfTxs>1</NbOfTxs>", b"<NbOfTxs>2</NbOfTxs>", 1
    )
    assert (await client.post("/v1/files", content=miscounted)).status_code == 201
    await client.post("/_control/advance", json={"days": 3})

    pain002 = xmlschema.XMLSchema(str(PAIN002_XSD))
    read: dict[str, list[object]] = {"pain.002": [], "camt.054": [], "camt.053": []}
    listed = (await client.get("/v1/reports", params={"limit": 1000})).json()["reports"]
    for report in listed:
        data = (await client.get(f"/v1/reports/{report['report_id']}")).content
        if report["kind"] == "pain.002":
            pain002.validate(data.decode())
        read[report["kind"]].append(read_report(data))

    statuses = [s for s in read["pain.002"] if isinstance(s, StatusReport)]
    told = {(t.end_to_end_id, t.status, t.reason) for s in statuses for t in s.transactions}
    assert (refused, PaymentStatus.REJECTED, "AC04") in told
    assert {(paid, PaymentStatus.ACCEPTED_SETTLEMENT_COMPLETED, None)} <= told
    groups = {(s.original_msg_id, s.group_status, s.group_reason) for s in statuses}
    assert ("MSG-AM18", PaymentStatus.REJECTED, "AM18") in groups

    notices = [n for n in read["camt.054"] if isinstance(n, NotificationReport)]
    entries = [e for n in notices for note in n.notifications for e in note.entries]
    returns = [t.returned_end_to_end_id for e in entries for t in e.transactions]
    assert [r for r in returns if r is not None] == [returned]

    statements = [
        s for r in read["camt.053"] if isinstance(r, StatementReport) for s in r.statements
    ]
    assert [s.electronic_sequence for s in statements] == [1, 2, 3]
    assert all(closing_balance_agrees(s) for s in statements)
    assert {s.account_iban for s in statements} == {DEBTOR_IBAN}

    effects = (await client.get("/v1/effects")).json()
    assert effects == {"debits": {paid: 1, returned: 1}, "returns": {returned: 1}}
