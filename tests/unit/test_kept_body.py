"""The inbox keeps a webhook's body compressed and gives back the exact bytes the rail signed;
a body kept uncompressed by an older inbox reads as it is."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from services.inbox.kept_body import MARK, kept, received

# A transfer webhook of the size a rail sends, as the simulator's are.
EVENT = json.dumps(
    {
        "id": "evt_1Q2w3E4r5T6y7U8i9O0p",
        "object": "event",
        "type": "transfer.created",
        "created": 1764720000,
        "data": {
            "object": {
                "id": "tr_1Q2w3E4r5T6y7U8i9O0pAbCd",
                "object": "transfer",
                "amount": 125000,
                "amount_reversed": 0,
                "currency": "eur",
                "destination": "acct_1Q2w3E4r5T6y7U8i",
                "metadata": {"settlement_id": "01a21600-0000-7000-8000-000000000001"},
                "reversals": {"object": "list", "data": [], "has_more": False},
                "reversed": False,
                "transfer_group": None,
            }
        },
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": "9f" * 32},
    },
    indent=2,
).encode()


@given(st.binary(max_size=4096))
def test_any_body_comes_back_byte_for_byte(body: bytes) -> None:
    assert received(kept(body)) == body


def test_a_webhook_is_kept_in_well_under_half_its_size() -> None:
    stored = kept(EVENT)
    assert stored.startswith(MARK) and len(stored) < len(EVENT) / 2


def test_a_body_stored_uncompressed_reads_as_it_is() -> None:
    assert received(EVENT) == EVENT
    assert received(b"") == b""
