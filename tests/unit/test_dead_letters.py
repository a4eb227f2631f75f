"""A dead letter always fits the producer's limit: whole when it can, else a bounded stub that
still says why, from where, and which bytes it stood for."""

from __future__ import annotations

import hashlib

from aiokafka import ConsumerRecord

from services.ledger.dead_letters import DeadLetter, bounded, record_size

LIMIT = 1_048_576


def dead(value: bytes, key: bytes | None = b"ref-1") -> DeadLetter:
    record = ConsumerRecord(
        "settlement.commands", 4, 981, 0, 0, key, value, None, 0, len(value), []
    )
    return DeadLetter(record, "body_too_large", "command is larger than 16384 bytes")


def test_a_command_that_fits_with_its_reasons_is_dead_lettered_whole() -> None:
    key, value, headers = bounded(dead(b"x" * 1000), LIMIT)
    assert value == b"x" * 1000 and key == b"ref-1"
    names = dict(headers)
    assert names["reason"] == b"body_too_large"
    assert (names["source_topic"], names["source_partition"], names["source_offset"]) == (
        b"settlement.commands",
        b"4",
        b"981",
    )
    assert "truncated" not in names


def test_a_command_at_the_limit_becomes_a_stub_that_fits_and_names_the_original() -> None:
    original = bytes(range(256)) * (LIMIT // 256)
    key, value, headers = bounded(dead(original), LIMIT)
    names = dict(headers)
    assert record_size(key, value, headers) <= LIMIT
    assert names["truncated"] == b"true" and names["reason"] == b"body_too_large"
    assert names["original_bytes"] == str(len(original)).encode()
    assert names["original_sha256"] == hashlib.sha256(original).hexdigest().encode()
    assert names["source_offset"] == b"981"
    assert original.startswith(value) and len(value) > LIMIT - 2048  # as much as fits


def test_without_room_for_the_value_the_stub_keeps_only_the_headers() -> None:
    long_reason = DeadLetter(dead(b"y" * 5000).record, "invalid_field", "why " * 2000)
    _, value, headers = bounded(long_reason, LIMIT, keep_value=False)
    assert value == b"" and dict(headers)["original_bytes"] == b"5000"
    assert record_size(b"ref-1", value, headers) < 1024  # fits even a small topic limit


def test_a_key_as_large_as_the_limit_is_dropped_rather_than_the_dead_letter() -> None:
    key, value, headers = bounded(dead(b"z", key=b"k" * LIMIT), LIMIT)
    assert key is None and record_size(key, value, headers) <= LIMIT
