"""The SEPA rules that hold before any file is written: how a settlement is named in the
files, which IBANs are paid and in which form, and which text a file may carry."""

from __future__ import annotations

import uuid

import pytest

from services.domain.sepa import (
    MAX_REFERENCE,
    compact_iban,
    end_to_end_id,
    is_bic,
    is_sepa_iban,
    is_sepa_reference,
    is_sepa_text,
    sepa_text,
    settlement_of,
)

IBAN = "DE89370400440532013000"
SETTLEMENT = "0190f1e2-3c4d-7e5f-8a6b-7c8d9e0f1a2b"


def test_the_end_to_end_id_fits_iso_and_leads_back_to_the_settlement() -> None:
    e2e = end_to_end_id(SETTLEMENT)
    assert e2e == "0190f1e23c4d7e5f8a6b7c8d9e0f1a2b"
    assert len(e2e) <= MAX_REFERENCE and is_sepa_reference(e2e)
    assert settlement_of(e2e) == SETTLEMENT
    assert end_to_end_id(SETTLEMENT.upper()) == e2e  # one id, however it is spelled


def test_every_uuid_round_trips() -> None:
    for _ in range(100):
        settlement = str(uuid.uuid4())
        assert settlement_of(end_to_end_id(settlement)) == settlement


@pytest.mark.parametrize(
    "other", ["NOTPROVIDED", "0190F1E23C4D7E5F8A6B7C8D9E0F1A2B", SETTLEMENT, "0190f1e2", ""]
)
def test_an_id_not_minted_by_settle_names_no_settlement(other: str) -> None:
    assert settlement_of(other) is None


def test_a_settlement_id_that_is_no_uuid_has_no_end_to_end_id() -> None:
    with pytest.raises(ValueError):
        end_to_end_id("settlement-1")


def test_the_stored_iban_is_compact_and_upper_case() -> None:
    assert compact_iban("de89 3704 0044 0532 0130 00") == IBAN
    assert compact_iban(IBAN) == IBAN
    assert is_sepa_iban(IBAN)
    assert not is_sepa_iban("DE89 3704 0044 0532 0130 00")  # valid, but not the stored form
    assert not is_sepa_iban("de89370400440532013000")


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("DE89370400440532013001", "Invalid checksum digits"),
        ("DE8937040044053201300", "Invalid IBAN length"),
        ("BR1800360305000010009795493C1", "outside the SEPA zone"),
        ("DE89-3704-0044-0532-0130-00", "only letters, digits and spaces"),
        ("DE89\t370400440532013000", "only letters, digits and spaces"),
        ("", "only letters, digits and spaces"),
    ],
)
def test_an_iban_settle_cannot_pay_is_refused_with_the_reason(typed: str, why: str) -> None:
    assert not is_sepa_iban(typed)
    with pytest.raises(ValueError) as refused:
        compact_iban(typed)
    assert why in str(refused.value)


def test_the_sepa_zone_reaches_beyond_the_euro_area() -> None:
    assert is_sepa_iban("CH9300762011623852957")
    assert is_sepa_iban("GB33BUKB20201555555555")


def test_a_bic_is_eight_or_eleven_upper_case_characters() -> None:
    assert is_bic("COBADEFFXXX") and is_bic("ABNANL2A")
    assert not is_bic("cobadeffxxx")
    assert not is_bic("COBADEFF1")
    assert not is_bic("COBAZZFFXXX")  # no such country


@pytest.mark.parametrize(
    ("typed", "written"),
    [
        ("Jürgen Müller & Söhne", "Jurgen Muller + Sohne"),
        ("Straße", "Strasse"),
        ("Łukasz Øster-Ærø", "Lukasz Oster-AEro"),
        ("François  O\u2019Brien\n", "Francois O'Brien"),  # typographic apostrophe
        ("Ærø \u2013 Crème brûlée", "AEro - Creme brulee"),  # en dash
        ("ACME (EU) Ltd. 4/2, no. 7?", "ACME (EU) Ltd. 4/2, no. 7?"),
    ],
)
def test_latin_text_is_spelled_in_the_sepa_set(typed: str, written: str) -> None:
    assert sepa_text(typed) == written


@pytest.mark.parametrize("foreign", ["Дмитрий", "Ελένη", "山田", "pay@example", "a_b", "x;y"])
def test_text_without_a_spelling_in_the_sepa_set_is_refused_never_dropped(foreign: str) -> None:
    with pytest.raises(ValueError, match="no spelling in the SEPA character set"):
        sepa_text(foreign)
    assert not is_sepa_text(foreign)


def test_a_name_fits_once_spelled() -> None:
    assert is_sepa_text("x" * 70)
    assert not is_sepa_text("x" * 71)
    assert not is_sepa_text("ß" * 36)  # 72 once spelled
    assert not is_sepa_text("   ")


@pytest.mark.parametrize("reference", ["/abc", "abc/", "a//b", "a b", "x" * 36, "", "ä"])
def test_a_reference_the_epc_forbids(reference: str) -> None:
    assert not is_sepa_reference(reference)
