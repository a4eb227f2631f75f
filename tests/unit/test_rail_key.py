"""The rail idempotency key: stable across processes and backups, distinct for distinct content."""

from __future__ import annotations

import re

import pytest

from services.domain.rail_key import rail_idempotency_key

SID = "0193a8f2-5c1e-7b3a-9d4e-2f6a8b0c1d2e"
ARGS = ("acme", SID, "acct_1Nv0FGQ9RKHgCVdK", 1050, "EUR")
# Computed once from the v1 scheme; a change here re-keys every instruction a relay re-issues.
KNOWN = "9ff2f83d8f1bc8ac60848e1148757ce560c3b66ca1a21f90c53b3926c5624550"


def test_a_fixed_settlement_always_gets_the_same_key() -> None:
    assert rail_idempotency_key(*ARGS) == KNOWN


def test_the_key_is_64_lower_case_hex_characters() -> None:
    assert re.fullmatch(r"[0-9a-f]{64}", rail_idempotency_key(*ARGS))


@pytest.mark.parametrize(
    "index, value",
    [
        (0, "globex"),
        (1, "0193a8f2-5c1e-7b3a-9d4e-2f6a8b0c1d2f"),
        (2, "acct_other"),
        (3, 1051),
        (4, "USD"),
    ],
)
def test_every_field_changes_the_key(index: int, value: object) -> None:
    args = list(ARGS)
    args[index] = value
    assert rail_idempotency_key(*args) != KNOWN  # type: ignore[arg-type]


def test_fields_cannot_run_into_each_other() -> None:
    a = rail_idempotency_key("ac", SID, "meacct", 1, "EUR")
    b = rail_idempotency_key("acme", SID, "acct", 1, "EUR")
    assert a != b


def test_spellings_of_one_settlement_id_give_one_key() -> None:
    assert rail_idempotency_key("acme", SID.upper(), *ARGS[2:]) == KNOWN


@pytest.mark.parametrize(
    "args",
    [
        ("acme", "not-a-uuid", "acct", 1, "EUR"),
        ("acme", SID, "acct", 0, "EUR"),
        ("acme", SID, "acct", 1, "eur"),
    ],
)
def test_bad_input_is_refused(args: tuple[str, str, str, int, str]) -> None:
    with pytest.raises(ValueError):
        rail_idempotency_key(*args)
