"""Response bodies: deterministic bytes, so a replay is byte-identical to the first answer."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from services.ledger.responses import settlement_body, timestamp
from services.platform.edge import error_body

ACCEPTED: dict[str, Any] = {
    "settlement_id": "0193a8f2-5c1e-7b3a-9d4e-2f6a8b0c1d2e",
    "reference": "inv-42",
    "payee": "Zoë",
    "destination": "acct_1",
    "amount": 1050,
    "currency": "EUR",
    "rail": "stripe",
    "metadata": {"z": "1", "a": "2"},
    "status": "accepted",
    "rail_idempotency_key": "ab" * 32,
    "created_at": datetime(2026, 11, 25, 21, 59, 35, 123999, tzinfo=UTC),
}


def test_an_error_body_is_compact_sorted_json_with_code_message_and_field() -> None:
    assert error_body("invalid_amount", "amount must be > 0", "amount") == (
        b'{"error":{"code":"invalid_amount","field":"amount","message":"amount must be > 0"}}'
    )
    assert error_body("store_unavailable", "retry") == (
        b'{"error":{"code":"store_unavailable","field":null,"message":"retry"}}'
    )


def test_extra_error_details_sit_beside_the_code() -> None:
    body = json.loads(error_body("idempotency_key_in_use", "wait", None, retry_after=2))
    assert body["error"] == {
        "code": "idempotency_key_in_use",
        "message": "wait",
        "field": None,
        "retry_after": 2,
    }


def test_an_error_body_echoing_any_client_text_is_ascii() -> None:
    body = error_body("unknown_field", "unknown field", "\ud800é")
    assert body.isascii() and json.loads(body)["error"]["field"] == "\ud800é"


def test_the_settlement_body_is_exactly_this() -> None:
    assert (
        settlement_body(**ACCEPTED)
        == (
            '{"amount":1050,"created_at":"2026-11-25T21:59:35.123Z","currency":"EUR",'
            '"destination":"acct_1","id":"0193a8f2-5c1e-7b3a-9d4e-2f6a8b0c1d2e",'
            '"metadata":{"a":"2","z":"1"},"object":"settlement","payee":"Zoë","rail":"stripe",'
            f'"rail_idempotency_key":"{"ab" * 32}","rail_reference":null,"reference":"inv-42",'
            '"status":"accepted"}'
        ).encode()
    )


def test_equal_values_render_equal_bytes_whatever_the_metadata_order() -> None:
    reordered = {**ACCEPTED, "metadata": {"a": "2", "z": "1"}}
    assert settlement_body(**reordered) == settlement_body(**ACCEPTED)


def test_timestamps_are_utc_with_truncated_milliseconds() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert timestamp(datetime(2026, 1, 1, 1, 0, 0, 999999, tzinfo=plus_two)) == (
        "2025-12-31T23:00:00.999Z"
    )
    assert timestamp(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000Z"
    with pytest.raises(ValueError):
        timestamp(datetime(2026, 1, 1))
