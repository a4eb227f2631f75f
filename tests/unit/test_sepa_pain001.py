"""The pain.001.001.09 settle sends its bank: valid against the official XSD, one block per
execution date with counts and sums right, a MsgId the bank can deduplicate (the same for the
same batch, another for any other), and nothing returned that would breach the XSD."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from services.adapters.sepa.errors import MalformedFile, Pain001Refused
from services.adapters.sepa.pain001 import (
    CreditTransfer,
    Debtor,
    Pain001,
    build_pain001,
    payment_info_id,
)
from services.adapters.sepa.pain001_read import read_pain001
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import PAIN001_09, schema_problems
from services.domain.sepa import end_to_end_id, is_sepa_reference, settlement_of

DEBTOR = Debtor("Settle Payments GmbH", "DE89370400440532013000", "COBADEFFXXX")
MONDAY, TUESDAY = date(2026, 3, 2), date(2026, 3, 3)
CREATED = datetime(2026, 3, 1, 16, 30, tzinfo=timezone(timedelta(hours=1)))
SETTLEMENTS = [f"0190f1e2-3c4d-7e5f-8a6b-7c8d9e0f1a{n:02x}" for n in range(4)]


def transfer(
    n: int,
    amount: int,
    day: date,
    *,
    creditor_name: str = "",
    creditor_iban: str = "FR1420041010050500013M02606",
    creditor_bic: str | None = None,
) -> CreditTransfer:
    return CreditTransfer(
        end_to_end_id=end_to_end_id(SETTLEMENTS[n]),
        amount=amount,
        creditor_name=creditor_name or f"Creditor {n}",
        creditor_iban=creditor_iban,
        remittance=f"settlement ref {n}",
        execution_date=day,
        creditor_bic=creditor_bic,
    )


BATCH = [
    transfer(0, 12345, MONDAY),
    transfer(1, 1, TUESDAY, creditor_iban="NL91ABNA0417164300", creditor_bic="ABNANL2A"),
    transfer(2, 99_999_999_999, MONDAY),
    transfer(3, 5000, TUESDAY, creditor_name="Jürgen Müller & Söhne"),
]


def built(
    transfers: Sequence[CreditTransfer] = BATCH,
    *,
    debtor: Debtor = DEBTOR,
    batch_booking: bool = True,
    created_at: datetime = CREATED,
) -> Pain001:
    return build_pain001(debtor, transfers, batch_booking=batch_booking, created_at=created_at)


def refusal(transfers: list[CreditTransfer], debtor: Debtor = DEBTOR) -> str:
    with pytest.raises(Pain001Refused) as refused:
        built(transfers, debtor=debtor)
    assert not refused.value.retriable
    return refused.value.reason


def test_the_file_is_valid_against_the_official_xsd() -> None:
    root = parse_bank_xml(built().data)
    assert root.tag == f"{{{PAIN001_09}}}Document"
    assert schema_problems(root) == []


def test_one_block_per_execution_date_with_its_counts_and_sums() -> None:
    file = built()
    contents = read_pain001(file.data)
    assert contents.msg_id == file.msg_id
    by_block: dict[str, list[int]] = {}
    for t in contents.transfers:
        by_block.setdefault(t.payment_info_id, []).append(t.amount)
    assert by_block == {
        payment_info_id(file.msg_id, MONDAY): [12345, 99_999_999_999],
        payment_info_id(file.msg_id, TUESDAY): [1, 5000],
    }
    text = file.data.decode()
    assert "<NbOfTxs>4</NbOfTxs>" in text and "<CtrlSum>1000000173.45</CtrlSum>" in text
    assert "<CtrlSum>1000000123.44</CtrlSum>" in text and "<CtrlSum>50.01</CtrlSum>" in text
    assert '<InstdAmt Ccy="EUR">0.01</InstdAmt>' in text
    for marker in ("<PmtMtd>TRF</PmtMtd>", "<Cd>SEPA</Cd>", "<ChrgBr>SLEV</ChrgBr>"):
        assert text.count(marker) == 2


def test_what_the_file_asks_is_what_was_given() -> None:
    contents = read_pain001(built().data)
    assert contents.debtor_iban == DEBTOR.iban and contents.batch_booking is True
    assert contents.created_at == CREATED
    read = {t.end_to_end_id: t for t in contents.transfers}
    for given in BATCH:
        got = read[given.end_to_end_id]
        assert (got.amount, got.creditor_iban, got.execution_date, got.remittance) == (
            given.amount,
            given.creditor_iban,
            given.execution_date,
            given.remittance,
        )
        assert settlement_of(got.end_to_end_id) in SETTLEMENTS


def test_the_msg_id_is_the_same_for_the_same_batch_whenever_and_in_any_order() -> None:
    first = built()
    again = built(list(reversed(BATCH)), created_at=CREATED + timedelta(days=1))
    assert again.msg_id == first.msg_id
    assert is_sepa_reference(first.msg_id) and len(first.msg_id) == 35
    assert first.msg_id.startswith("SETTLE-")


@pytest.mark.parametrize(
    "other",
    [
        lambda: built(batch_booking=False),
        lambda: built(debtor=dataclasses.replace(DEBTOR, bic=None)),
        lambda: built([*BATCH[:3], dataclasses.replace(BATCH[3], amount=5001)]),
        lambda: built([*BATCH[:3], dataclasses.replace(BATCH[3], execution_date=MONDAY)]),
        lambda: built([*BATCH[:3], dataclasses.replace(BATCH[3], remittance="other ref")]),
        lambda: built(BATCH[:3]),
    ],
    ids=["batch-flag", "debtor-bic", "amount", "date", "remittance", "one-less"],
)
def test_any_other_content_gets_another_msg_id(other: Callable[[], Pain001]) -> None:
    assert other().msg_id != built().msg_id


def test_the_payment_info_id_fits_and_names_the_date() -> None:
    pmt_inf_id = payment_info_id(built().msg_id, TUESDAY)
    assert len(pmt_inf_id) == 35 and pmt_inf_id.endswith("-20260303")
    assert is_sepa_reference(pmt_inf_id)


def test_end_to_end_ids_are_the_settlements_and_fit_iso() -> None:
    for t in read_pain001(built().data).transfers:
        assert len(t.end_to_end_id) == 32 <= 35


def test_without_a_bic_the_debtor_agent_is_not_provided() -> None:
    text = built(debtor=dataclasses.replace(DEBTOR, bic=None)).data.decode()
    assert "<Othr>\n" in text and "<Id>NOTPROVIDED</Id>" in text and "<BICFI>" in text
    assert text.count("<BICFI>") == 1  # only the creditor's that has one


def test_names_are_spelled_in_the_sepa_set_and_ibans_compacted() -> None:
    file = built(debtor=dataclasses.replace(DEBTOR, iban="de89 3704 0044 0532 0130 00"))
    text = file.data.decode()
    assert "<Nm>Jurgen Muller + Sohne</Nm>" in text
    assert "<IBAN>DE89370400440532013000</IBAN>" in text
    assert file.msg_id == built().msg_id  # the stored form of the same account


def test_a_bad_iban_is_refused_and_named() -> None:
    bad = dataclasses.replace(BATCH[0], creditor_iban="DE89370400440532013001")
    reason = refusal([bad, *BATCH[1:]])
    assert f"transfer {BATCH[0].end_to_end_id!r} creditor IBAN" in reason
    assert "checksum" in reason


def test_an_iban_outside_sepa_is_refused() -> None:
    reason = refusal([dataclasses.replace(BATCH[0], creditor_iban="BR1800360305000010009795493C1")])
    assert "outside the SEPA zone" in reason


def test_a_name_without_a_sepa_spelling_is_refused_not_mangled() -> None:
    reason = refusal([dataclasses.replace(BATCH[0], creditor_name="Дмитрий Петров")])
    assert "creditor name" in reason and "no spelling in the SEPA character set" in reason


def test_a_name_over_the_epcs_70_characters_is_refused() -> None:
    assert "71 characters, above the EPC's 70" in refusal(
        [dataclasses.replace(BATCH[0], creditor_name="x" * 71)]
    )
    assert "debtor name" in refusal(BATCH, dataclasses.replace(DEBTOR, name="ß" * 36))
    assert built([dataclasses.replace(BATCH[0], creditor_name="x" * 70)]).data


@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_name_is_refused_with_the_xsds_reason(name: str) -> None:
    reason = refusal([dataclasses.replace(BATCH[0], creditor_name=name)])
    assert "/Document/CstmrCdtTrfInitn/PmtInf/CdtTrfTxInf/Cdtr/Nm" in reason
    assert "length" in reason


def test_a_remittance_over_140_characters_breaches_the_xsd() -> None:
    reason = refusal([dataclasses.replace(BATCH[0], remittance="r" * 141)])
    assert "RmtInf/Ustrd" in reason


@pytest.mark.parametrize("amount", [0, -1, 100_000_000_000])
def test_an_amount_sepa_cannot_carry_is_refused(amount: int) -> None:
    assert "is not 1 .. 99999999999 cents" in refusal([transfer(0, amount, MONDAY)])


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(Pain001Refused) as refused:
        built(
            [
                dataclasses.replace(BATCH[0], creditor_iban="XX00"),
                dataclasses.replace(BATCH[2], creditor_name="山田"),
                BATCH[3],
                BATCH[3],
            ],
            debtor=dataclasses.replace(DEBTOR, bic="nope"),
        )
    assert len(refused.value.reasons) == 4
    assert any("more than once" in r for r in refused.value.reasons)


def test_an_empty_batch_and_a_naive_time_are_refused() -> None:
    assert "at least one transfer" in refusal([])
    with pytest.raises(ValueError, match="aware"):
        built(created_at=datetime(2026, 3, 1, 16, 30))


def test_the_creation_time_is_written_with_its_offset() -> None:
    text = built(created_at=datetime(2026, 3, 1, 15, 30, 12, 999, tzinfo=UTC)).data.decode()
    assert "<CreDtTm>2026-03-01T15:30:12+00:00</CreDtTm>" in text


def test_reading_refuses_a_file_whose_counts_do_not_match() -> None:
    data = built().data.replace(b"<NbOfTxs>4</NbOfTxs>", b"<NbOfTxs>5</NbOfTxs>")
    with pytest.raises(MalformedFile, match="NbOfTxs 5, but 4 transfers"):
        read_pain001(data)
    data = built().data.replace(b"<CtrlSum>50.01</CtrlSum>", b"<CtrlSum>50.02</CtrlSum>")
    with pytest.raises(MalformedFile, match=r"CtrlSum 50\.02"):
        read_pain001(data)


def test_reading_refuses_a_file_that_breaches_the_xsd() -> None:
    data = built().data.replace(b"<PmtMtd>TRF</PmtMtd>", b"<PmtMtd>XXX</PmtMtd>")
    with pytest.raises(MalformedFile, match=r"breaches the pain\.001\.001\.09 XSD"):
        read_pain001(data)
