"""The plain-Python body writer of flat records writes exactly fastavro's bytes, and leaves
every record it cannot write (a missing, extra or mistyped field) to fastavro's path."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import fastavro
import pytest
from fastavro.schema import parse_schema
from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts.avro import default_catalog
from services.contracts.avro_body import body_writer

FLAT = parse_schema(
    {
        "type": "record",
        "name": "Flat",
        "fields": [
            {"name": "flag", "type": "boolean"},
            {"name": "small", "type": "int"},
            {"name": "big", "type": "long"},
            {"name": "text", "type": "string"},
            {"name": "blob", "type": "bytes"},
            {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "maybe", "type": ["null", "string", "bytes", "boolean"], "default": None},
            {"name": "nothing", "type": "null"},
        ],
    }
)
EVENT = default_catalog().current("SettlementEvent").schema
# Where the varint grows a byte, and the ends of the range.
EDGES = [0, 1, -1, 63, 64, -64, -65, 127, 128, 8191, 8192, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]
LONGS = st.sampled_from(EDGES) | st.integers(-(2**63), 2**63 - 1)
INTS = st.sampled_from(EDGES[:-2]) | st.integers(-(2**31), 2**31 - 1)
INSTANTS = st.one_of(
    LONGS,
    st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=11))]
        ),
    ),
)
TEXT = st.text(max_size=80)
OPTIONAL_TEXT = st.none() | TEXT
FLAT_RECORDS = st.fixed_dictionaries(
    {
        "flag": st.booleans(),
        "small": INTS,
        "big": LONGS,
        "text": TEXT,
        "blob": st.binary(max_size=80),
        "when": INSTANTS,
        "maybe": st.none() | TEXT | st.binary(max_size=8) | st.booleans(),
        "nothing": st.none(),
    }
)
EVENTS = st.fixed_dictionaries(
    {
        "event_id": TEXT,
        "settlement_id": TEXT,
        "tenant": TEXT,
        "reference": TEXT,
        "type": TEXT,
        "sequence": INTS,
        "amount": LONGS,
        "currency": TEXT,
        "occurred_at": INSTANTS,
        "status": OPTIONAL_TEXT,
        "rail_reference": OPTIONAL_TEXT,
        "reason": OPTIONAL_TEXT,
        "rail": OPTIONAL_TEXT,
    }
)


def fastavro_body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


@settings(max_examples=400)
@given(EVENTS)
def test_a_settlement_event_body_is_fastavros_byte_for_byte(record: dict[str, Any]) -> None:
    write = body_writer(EVENT)
    assert write is not None
    assert write(record) == fastavro_body(EVENT, record)


@settings(max_examples=400)
@given(FLAT_RECORDS)
def test_every_flat_type_is_written_as_fastavro_writes_it(record: dict[str, Any]) -> None:
    write = body_writer(FLAT)
    assert write is not None
    assert write(record) == fastavro_body(FLAT, record)


EVENT_SAMPLE: dict[str, Any] = {
    "event_id": "e",
    "settlement_id": "s",
    "tenant": "acme",
    "reference": "r",
    "type": "paid",
    "sequence": 3,
    "amount": 700,
    "currency": "EUR",
    "occurred_at": datetime.now(UTC),
    "status": "paid",
    "rail_reference": None,
    "reason": None,
}
LEFT_TO_FASTAVRO = {
    "a defaulted field left out": {k: v for k, v in EVENT_SAMPLE.items() if k != "reason"},
    "an unknown field": {**EVENT_SAMPLE, "note": "x"},
    "an unknown field in place of a known one": {
        **{k: v for k, v in EVENT_SAMPLE.items() if k != "reason"},
        "note": None,
    },
    "a bool for an int": {**EVENT_SAMPLE, "sequence": True},
    "an int out of range": {**EVENT_SAMPLE, "sequence": 2**31},
    "a long out of range": {**EVENT_SAMPLE, "amount": 2**63},
    "a float for a long": {**EVENT_SAMPLE, "amount": 7.0},
    "a naive datetime": {**EVENT_SAMPLE, "occurred_at": datetime(2026, 1, 1)},
    "a date for a timestamp": {**EVENT_SAMPLE, "occurred_at": datetime(2026, 1, 1).date()},
    "bytes for a string": {**EVENT_SAMPLE, "tenant": b"acme"},
    "an int in a union of null and string": {**EVENT_SAMPLE, "reason": 3},
    "a lone surrogate": {**EVENT_SAMPLE, "reference": "\ud800"},
}


@pytest.mark.parametrize("record", LEFT_TO_FASTAVRO.values(), ids=LEFT_TO_FASTAVRO.keys())
def test_a_record_it_cannot_write_exactly_is_left_to_fastavro(record: dict[str, Any]) -> None:
    write = body_writer(EVENT)
    assert write is not None and write(record) is None


def test_a_flat_record_with_a_mistyped_boolean_or_null_is_left_to_fastavro() -> None:
    write = body_writer(FLAT)
    record = {
        "flag": True,
        "small": 1,
        "big": 2,
        "text": "t",
        "blob": b"b",
        "when": 0,
        "maybe": None,
        "nothing": None,
    }
    assert write is not None and write(record) == fastavro_body(FLAT, record)
    assert write({**record, "flag": 1}) is None
    assert write({**record, "nothing": 0}) is None
    assert write({**record, "maybe": 0}) is None


@pytest.mark.parametrize(
    "field",
    [
        {"type": "array", "items": "string"},
        {"type": "map", "values": "long"},
        "double",
        {"type": "long", "logicalType": "timestamp-micros"},
        ["null", "long"],
        {"type": "string", "logicalType": "uuid"},
    ],
)
def test_a_schema_beyond_flat_types_gets_no_writer(field: Any) -> None:
    schema = parse_schema(
        {
            "type": "record",
            "name": "Deep",
            "fields": [{"name": "ok", "type": "string"}, {"name": "deep", "type": field}],
        }
    )
    assert body_writer(schema) is None
