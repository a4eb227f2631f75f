"""The dispatch trigger's shortcut: a settlement event's type read from the head of its
message, and None, meaning "decode it whole", whenever the head cannot be trusted."""

from __future__ import annotations

from typing import Any

import pytest

from services.contracts import avro
from services.relay.event_kind import EVENT, EventKinds
from tests.events import settlement_event

KINDS = ["created", "processing", "submitted", "paid", "failed", "x" * 200]


def event(kind: str, **changes: Any) -> dict[str, Any]:
    return settlement_event(kind, status="accepted", **changes)


def current() -> EventKinds:
    return EventKinds(avro.default_catalog().current(EVENT))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k[:12])
def test_the_type_is_read_from_the_head_of_a_current_message(kind: str) -> None:
    # A long reference moves `type` past a one-byte length: the lengths are read, not assumed.
    message = avro.encode(EVENT, event(kind, reference="r" * 300))

    assert current().kind(message) == kind.encode()


def test_a_message_of_another_writer_is_left_to_the_whole_decode() -> None:
    # Another release, with a field before `type`: read as the current one, its head lies.
    schema = avro.default_catalog().current(EVENT).schema
    note = {"name": "note", "type": "string", "default": ""}
    other = schema | {"fields": [note, *schema["fields"]]}
    message = avro.encode(other, event("paid", note="created"))

    assert current().kind(message) is None


@pytest.mark.parametrize("cut", [0, 5, 12, 20, 40], ids=lambda n: f"first_{n}_bytes_of_the_body")
def test_a_head_cut_short_is_left_to_the_whole_decode(cut: int) -> None:
    message = avro.encode(EVENT, event("paid"))
    header = len(avro.default_catalog().current(EVENT).header)

    assert current().kind(message[: header + cut]) is None


def test_bytes_that_are_not_a_settlement_event_are_left_to_the_whole_decode() -> None:
    kinds = current()
    header = avro.default_catalog().current(EVENT).header

    assert kinds.kind(b"") is None
    assert kinds.kind(b"\x00not avro") is None
    assert kinds.kind(header + b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01") is None
    assert kinds.kind(header + b"\x01") is None  # a negative length


def test_a_schema_with_anything_but_strings_before_the_type_is_never_read_short() -> None:
    schema = {
        "type": "record",
        "name": "SettlementEvent",
        "namespace": "settle.test",
        "fields": [{"name": "sequence", "type": "int"}, {"name": "type", "type": "string"}],
    }
    writer = avro.Writer.of(schema)
    # A sequence of 0 is one zero byte, which read as a string is an empty one.
    message = avro.encode(writer, {"sequence": 0, "type": "created"})

    assert EventKinds(writer).kind(message) is None
