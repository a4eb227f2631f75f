"""In two-person mode a command's operator is proven by that operator's own token."""

from __future__ import annotations

import pytest

from services.operations.errors import Refused
from services.operations.operator_proof import prove_operator
from services.platform.settings import load_settings

TOKENS = {"SETTLE_OPERATOR_TOKENS": "alice:alice-token-1,alice:alice-token-2,bob:bob-token"}


def test_outside_two_person_mode_the_named_operator_is_taken_at_its_word() -> None:
    prove_operator(load_settings(TOKENS), "anyone", None)


@pytest.mark.parametrize("token", [None, "", "bob-token", "nobodys-token"])
def test_in_two_person_mode_a_name_without_its_own_token_is_refused(token: str | None) -> None:
    settings = load_settings({**TOKENS, "SETTLE_TWO_PERSON": "true"})
    with pytest.raises(Refused) as refused:
        prove_operator(settings, "alice", token)
    assert refused.value.code == "operator_unproven"
    assert "bob-token" not in refused.value.message


@pytest.mark.parametrize("token", ["alice-token-1", "alice-token-2"])
def test_in_two_person_mode_any_of_the_operators_tokens_proves_them(token: str) -> None:
    prove_operator(load_settings({**TOKENS, "SETTLE_TWO_PERSON": "true"}), "alice", token)
