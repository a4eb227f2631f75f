"""The bank takes a pain.001 file once: byte for byte, deduplicated by MsgId alone and
forever; refuses anything not a valid pain.001.001.09 (FF01) without keeping a byte of it;
answers each taken file with a pain.002 (group ACTC, RJCT per refused transaction with its
reason, or the group RJCT); and still takes a file whose answer it then loses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path

import httpx
import pytest
from lxml import etree

from banksim.app import create_app
from banksim.bank import Bank
from banksim.clock import ManualClock
from banksim.errors import AnswerDropped
from banksim.faults import Faults
from banksim.payment_files import (
    PaymentBlock,
    PaymentFileSpec,
    Transfer,
    one_transfer_file,
    payment_file,
)

MONDAY = date(2026, 1, 5)


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    bank = Bank.open(tmp_path / "bank", ManualClock(), 20.0, MONDAY, Faults())
    yield bank
    bank.close()


@pytest.fixture
async def client(bank: Bank) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(bank, max_file_bytes=64 * 1024))
    async with httpx.AsyncClient(transport=transport, base_url="http://bank") as c:
        yield c


async def delivered(client: httpx.AsyncClient, kind: str) -> list[etree._Element]:
    """The delivered reports of `kind`, parsed, in delivery order."""
    page = (await client.get("/v1/reports", params={"kind": kind, "limit": 1000})).json()
    reports = [await client.get(f"/v1/reports/{r['report_id']}") for r in page["reports"]]
    return [etree.fromstring(r.content) for r in reports]


def statuses(report: etree._Element) -> dict[str, tuple[str, str | None]]:
    """{EndToEndId: (TxSts, reason code)} of a pain.002."""
    found = {}
    for tx in report.iterfind(".//{*}TxInfAndSts"):
        e2e, status = tx.findtext("{*}OrgnlEndToEndId"), tx.findtext("{*}TxSts")
        assert e2e is not None and status is not None
        found[e2e] = (status, tx.findtext("{*}StsRsnInf/{*}Rsn/{*}Cd"))
    return found


async def test_a_file_is_taken_once_and_its_msg_id_refused_du01_ever_after(
    client: httpx.AsyncClient,
) -> None:
    body = one_transfer_file("MSG-ONCE", Transfer("E2E-ONCE"))
    first = await client.post("/v1/files", content=body)
    assert first.status_code == 201
    taken = first.json()
    assert taken == {
        "file_id": taken["file_id"],
        "msg_id": "MSG-ONCE",
        "business_date": "2026-01-05",
    }

    # The same MsgId with other content is the same file to the bank: refused, never paid
    other = one_transfer_file("MSG-ONCE", Transfer("E2E-OTHER", amount_minor=999))
    for again in (body, other):
        refused = await client.post("/v1/files", content=again)
        assert refused.status_code == 409
        assert refused.json()["code"] == "DU01"
        assert refused.json()["msg_id"] == "MSG-ONCE"
        assert refused.json()["file_id"] == taken["file_id"]

    files = (await client.get("/v1/files")).json()["files"]
    assert [f["msg_id"] for f in files] == ["MSG-ONCE"]
    assert (await client.get(f"/v1/files/{taken['file_id']}")).content == body
    assert (await client.get("/v1/effects")).json() == {"debits": {"E2E-ONCE": 1}, "returns": {}}


async def test_two_files_with_different_msg_ids_and_the_same_end_to_end_ids_are_both_paid(
    client: httpx.AsyncClient,
) -> None:
    for msg_id in ("MSG-A", "MSG-B"):
        body = one_transfer_file(msg_id, Transfer("E2E-TWICE-1"), Transfer("E2E-TWICE-2"))
        assert (await client.post("/v1/files", content=body)).status_code == 201
    effects = (await client.get("/v1/effects")).json()
    assert effects["debits"] == {"E2E-TWICE-1": 2, "E2E-TWICE-2": 2}


VALID = one_transfer_file("MSG-FF01", Transfer("E2E-FF01"))
HOSTILE = b"""<?xml version="1.0"?>
<!DOCTYPE Document [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:pain.001.001.09">&x;</Document>"""


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"not xml at all", id="not-xml"),
        pytest.param(VALID[:-40], id="truncated"),
        pytest.param(HOSTILE, id="doctype-entity"),
        pytest.param(VALID.replace(b"pain.001.001.09", b"pain.001.001.03"), id="other-version"),
        pytest.param(VALID.replace(b"<PmtMtd>TRF</PmtMtd>", b""), id="schema-invalid"),
        pytest.param(VALID.replace(b"FR1420041010050500013M02606", b"not an iban"), id="bad-iban"),
    ],
)
async def test_an_invalid_file_is_refused_ff01_and_nothing_of_it_is_kept(
    client: httpx.AsyncClient, body: bytes
) -> None:
    answer = await client.post("/v1/files", content=body)
    assert answer.status_code == 400
    assert answer.json()["code"] == "FF01"
    assert (await client.get("/v1/files")).json() == {"files": [], "next": None}
    assert (await client.get("/v1/reports")).json() == {"reports": [], "next": None}
    # the refused file's MsgId was never taken: the valid file under it is
    assert (await client.post("/v1/files", content=VALID)).status_code == 201


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_file_above_the_size_cap_is_refused_413_ff01(
    client: httpx.AsyncClient, declared: bool
) -> None:
    many = [Transfer(f"E2E-BIG-{n}") for n in range(200)]
    body = one_transfer_file("MSG-BIG", *many)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 4096):
            yield body[start : start + 4096]

    answer = await client.post("/v1/files", content=body if declared else chunks())
    assert answer.status_code == 413
    assert answer.json()["code"] == "FF01"
    assert (await client.get("/v1/files")).json()["files"] == []


async def test_a_reject_code_in_the_remittance_comes_back_as_pain002_rjct_with_that_code(
    client: httpx.AsyncClient,
) -> None:
    body = one_transfer_file(
        "MSG-REJ", Transfer("E2E-PAID"), Transfer("E2E-REFUSED", remittance="inv 7 reject:AC04")
    )
    assert (await client.post("/v1/files", content=body)).status_code == 201
    on_intake, on_booking = await delivered(client, "pain.002")
    assert on_intake.findtext(".//{*}OrgnlGrpInfAndSts/{*}OrgnlMsgId") == "MSG-REJ"
    assert on_intake.findtext(".//{*}GrpSts") == "ACTC"
    assert statuses(on_intake) == {"E2E-REFUSED": ("RJCT", "AC04")}
    assert statuses(on_booking) == {"E2E-PAID": ("ACSC", None)}
    assert (await client.get("/v1/effects")).json()["debits"] == {"E2E-PAID": 1}


@pytest.mark.parametrize(
    ("transfer", "reason"),
    [
        (Transfer("E2E-X", creditor_iban="DE89370400440532013001"), "AC01"),
        (Transfer("E2E-X", currency="USD"), "AM03"),
    ],
)
async def test_the_banks_own_checks_reject_a_transfer_with_their_reason(
    client: httpx.AsyncClient, transfer: Transfer, reason: str
) -> None:
    body = one_transfer_file("MSG-CHECK", transfer, Transfer("E2E-FINE"))
    assert (await client.post("/v1/files", content=body)).status_code == 201
    on_intake = (await delivered(client, "pain.002"))[0]
    assert statuses(on_intake) == {"E2E-X": ("RJCT", reason)}


async def test_a_file_whose_every_transaction_is_refused_is_rejected_as_a_group(
    client: httpx.AsyncClient,
) -> None:
    body = one_transfer_file("MSG-ALL", Transfer("E2E-R1", remittance="reject:AM04"))
    assert (await client.post("/v1/files", content=body)).status_code == 201
    [on_intake] = await delivered(client, "pain.002")  # nothing booked: no ACSC report
    assert on_intake.findtext(".//{*}GrpSts") == "RJCT"
    assert on_intake.findtext(".//{*}OrgnlPmtInfAndSts/{*}PmtInfSts") == "RJCT"
    assert statuses(on_intake) == {"E2E-R1": ("RJCT", "AM04")}
    assert (await client.get("/v1/effects")).json()["debits"] == {}


async def test_a_header_that_miscounts_its_transactions_rejects_the_group_am18(
    client: httpx.AsyncClient,
) -> None:
    spec = PaymentFileSpec("MSG-AM18", (PaymentBlock((Transfer("E2E-C1"), Transfer("E2E-C2"))),))
    body = payment_file(spec).replace(b"<NbOfTxs>2</NbOfTxs>", b"<NbOfTxs>3</NbOfTxs>", 1)
    assert (await client.post("/v1/files", content=body)).status_code == 201
    [on_intake] = await delivered(client, "pain.002")
    assert on_intake.findtext(".//{*}GrpSts") == "RJCT"
    assert on_intake.findtext(".//{*}OrgnlGrpInfAndSts/{*}StsRsnInf/{*}Rsn/{*}Cd") == "AM18"
    assert (await client.get("/v1/effects")).json()["debits"] == {}
    # the MsgId is spent all the same
    assert (await client.post("/v1/files", content=body)).status_code == 409


@pytest.mark.parametrize("dropped", [True, False], ids=["dropped", "gateway-timeout"])
async def test_a_lost_answer_still_takes_the_file_and_a_resend_is_refused_du01(
    client: httpx.AsyncClient, bank: Bank, dropped: bool
) -> None:
    bank.set_faults(Faults(lost_answer=1.0, lost_answer_dropped=1.0 if dropped else 0.0))
    body = one_transfer_file("MSG-LOST", Transfer("E2E-LOST"))
    if dropped:
        with pytest.raises(AnswerDropped):
            await client.post("/v1/files", content=body)
    else:
        answer = await client.post("/v1/files", content=body)
        assert answer.status_code == 504
        assert "file_id" not in answer.json()
    bank.set_faults(Faults())
    [kept] = (await client.get("/v1/files")).json()["files"]
    assert kept["msg_id"] == "MSG-LOST"
    resent = await client.post("/v1/files", content=body)
    assert resent.status_code == 409
    assert resent.json()["file_id"] == kept["file_id"]
    assert (await client.get("/v1/effects")).json()["debits"] == {"E2E-LOST": 1}
