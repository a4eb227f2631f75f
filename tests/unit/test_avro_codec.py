"""Avro single-object codec: header layout, CRC-64-AVRO fingerprints, strict encode, safe decode."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts.avro import (
    MARKER,
    SCHEMAS_DIR,
    SchemaCatalog,
    crc64_avro,
    decode,
    default_catalog,
    encode,
    fingerprint,
)
from services.contracts.avro_schema import CRC64_EMPTY
from services.domain.errors import SchemaError

EVENT: dict[str, Any] = {
    "event_id": "6f1c1f2e-3f4a-4b8e-9d1a-2b7c9e0f1a2b",
    "settlement_id": "0b8e6a4c-1d2f-4e3a-8b9c-7d6e5f4a3b2c",
    "tenant": "acme",
    "reference": "payout-2026-0001",
    "type": "paid",
    "sequence": 3,
    "amount": 1_250_00,
    "currency": "EUR",
    "occurred_at": datetime(2026, 11, 25, 9, 30, 15, 123000, tzinfo=UTC),
    "status": "paid",
    "rail_reference": "tr_1Q2w3E4r5T6y",
    "reason": None,
    "rail": "stripe",
}
COMMAND: dict[str, Any] = {
    "tenant": "acme",
    "idempotency_key": "7d0c3c1e-6a2b-4f4e-9d55-0e0d4f1b2a3c",
    "reference": "payout-2026-0001",
    "payee": "Zoë Müller",
    "destination": "acct_1Nv0FGQ9RKHgCVdK",
    "amount": 1_250_00,
    "currency": "EUR",
    "rail": "stripe",
    "metadata": {"invoice": "INV-77", "note": "¡ñ 漢字 🙂"},
}
SAMPLES = {"SettlementEvent": EVENT, "SettlementCommand": COMMAND}

# share/test/data/schema-tests.txt of apache/avro: input schema, its Parsing Canonical Form and
# its 64-bit Rabin fingerprint as Java prints it (a signed long).
PUBLISHED = [
    ('"null"', '"null"', 7195948357588979594),
    ('"boolean"', '"boolean"', -6970731678124411036),
    ('{"type":"int"}', '"int"', 8247732601305521295),
    ('"long"', '"long"', -3434872931120570953),
    ('"string"', '"string"', -8142146995180207161),
    ('[ "int" , {"type":"boolean"} ]', '["int","boolean"]', 5392556393470105090),
    (
        '{"fields":[], "type":"record", "name":"foo", "namespace":"x.y"}',
        '{"name":"x.y.foo","type":"record","fields":[]}',
        5916914534497305771,
    ),
    (
        '{"fields":[], "type":"record", "name":"foo", "doc":"foo", "aliases":["foo","bar"]}',
        '{"name":"foo","type":"record","fields":[]}',
        -4824392279771201922,
    ),
    (
        # the published input has "default":"true", a string fastavro rightly refuses
        '{ "fields":[{"type":"boolean", "aliases":[], "name":"f1", "default":true},'
        ' {"order":"descending","name":"f2","doc":"Hello","type":"int"}],'
        ' "type":"record", "name":"foo" }',
        '{"name":"foo","type":"record","fields":[{"name":"f1","type":"boolean"},'
        '{"name":"f2","type":"int"}]}',
        -4860222112080293046,
    ),
    (
        '{"namespace":"x.y.z", "type":"enum", "name":"foo", "doc":"foo bar",'
        ' "symbols":["A1", "A2"]}',
        '{"name":"x.y.z.foo","type":"enum","symbols":["A1","A2"]}',
        -4448647247586288245,
    ),
    (
        '{ "values":"string", "type":"map"}',
        '{"type":"map","values":"string"}',
        -8732877298790414990,
    ),
    (
        '{"name":"PigValue","type":"record",'
        ' "fields":[{"name":"value", "type":["null", "int", "long", "PigValue"]}]}',
        '{"name":"PigValue","type":"record",'
        '"fields":[{"name":"value","type":["null","int","long","PigValue"]}]}',
        -1759257747318642341,
    ),
]


def _signed(fp: int) -> int:
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def _schema_files() -> list[Path]:
    return sorted([*SCHEMAS_DIR.glob("*.avsc"), *SCHEMAS_DIR.glob("history/*/v*.avsc")])


# --- fingerprints ---------------------------------------------------------------------------


def test_crc64_of_nothing_is_the_empty_value() -> None:
    assert crc64_avro(b"") == CRC64_EMPTY == 0xC15D213AA4D7A795


@pytest.mark.parametrize(("source", "canonical", "published"), PUBLISHED)
def test_fingerprint_matches_the_avro_specification_test_vectors(
    source: str, canonical: str, published: int
) -> None:
    assert to_parsing_canonical_form(json.loads(source)) == canonical
    assert _signed(crc64_avro(canonical.encode())) == published
    assert _signed(fingerprint(json.loads(source))) == published


@pytest.mark.parametrize("path", _schema_files(), ids=lambda p: str(p.relative_to(SCHEMAS_DIR)))
def test_fingerprint_matches_fastavro(path: Path) -> None:
    schema = json.loads(path.read_text())
    # fastavro spells the fingerprint as the hex of its 8 little-endian bytes
    theirs = fastavro.schema.fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")
    assert fingerprint(schema).to_bytes(8, "little").hex() == theirs


def test_schemas_readme_lists_the_current_fingerprints() -> None:
    readme = (SCHEMAS_DIR / "README.md").read_text()
    for name in default_catalog().names:
        fp = default_catalog().current(name).fingerprint
        assert f"`0x{fp:016x}`" in readme
        assert f"`{fp.to_bytes(8, 'little').hex(' ')}`" in readme


# --- encoding -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_header_is_marker_then_little_endian_fingerprint_then_plain_avro_body(name: str) -> None:
    schema = json.loads((SCHEMAS_DIR / f"{name}.avsc").read_text())
    fp_hex = fastavro.schema.fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), SAMPLES[name])

    data = encode(name, SAMPLES[name])

    assert data[:2] == b"\xc3\x01" == MARKER
    assert data[2:10] == bytes.fromhex(fp_hex)
    assert int.from_bytes(data[2:10], "little") == fingerprint(schema)
    assert data[10:] == body.getvalue()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip(name: str) -> None:
    assert decode(encode(name, SAMPLES[name]), name) == SAMPLES[name]


def test_defaulted_fields_may_be_left_out() -> None:
    command = {k: v for k, v in COMMAND.items() if k not in ("rail", "metadata")}
    event = {
        k: v for k, v in EVENT.items() if k not in ("status", "rail_reference", "reason", "rail")
    }
    assert decode(encode("SettlementCommand", command), "SettlementCommand") == {
        **command,
        "rail": None,
        "metadata": {},
    }
    assert decode(encode("SettlementEvent", event), "SettlementEvent") == {
        **event,
        "status": None,
        "rail_reference": None,
        "reason": None,
        "rail": None,
    }


def test_occurred_at_is_an_instant_read_back_in_utc() -> None:
    paris = datetime(2026, 11, 25, 10, 30, 15, 123000, tzinfo=timezone(timedelta(hours=1)))
    millis = int(EVENT["occurred_at"].timestamp() * 1000)
    for given_as in (paris, millis):
        back = decode(
            encode("SettlementEvent", {**EVENT, "occurred_at": given_as}), "SettlementEvent"
        )
        assert back["occurred_at"] == EVENT["occurred_at"]
        assert back["occurred_at"].utcoffset() == timedelta(0)


INVALID_EVENTS = {
    "missing field": ({k: v for k, v in EVENT.items() if k != "amount"}, "missing field(s) amount"),
    "unknown field": ({**EVENT, "amout": 5}, "unknown field(s) amout"),
    "float amount": ({**EVENT, "amount": 12.5}, "amount"),
    "integral float amount": ({**EVENT, "amount": 1250.0}, "amount"),
    "bool amount": ({**EVENT, "amount": True}, "amount"),
    "string amount": ({**EVENT, "amount": "1250"}, "amount"),
    "amount beyond a long": ({**EVENT, "amount": 2**63}, "amount"),
    "sequence beyond an int": ({**EVENT, "sequence": 2**31}, "sequence"),
    "null for a string": ({**EVENT, "tenant": None}, "tenant"),
    "bytes for a string": ({**EVENT, "currency": b"EUR"}, "currency"),
    "int for a nullable string": ({**EVENT, "reason": 7}, "reason"),
    "naive datetime": ({**EVENT, "occurred_at": datetime(2026, 1, 1)}, "occurred_at"),
    "float timestamp": ({**EVENT, "occurred_at": 1.5e12}, "occurred_at"),
}


@pytest.mark.parametrize(("record", "says"), INVALID_EVENTS.values(), ids=INVALID_EVENTS.keys())
def test_encode_rejects_an_invalid_event(record: dict[str, Any], says: str) -> None:
    with pytest.raises(SchemaError, match="SettlementEvent") as caught:
        encode("SettlementEvent", record)
    assert says in str(caught.value)
    assert caught.value.retriable is False


@pytest.mark.parametrize(
    "metadata", [{"k": 1}, {"k": None}, {1: "v"}, [("k", "v")], "k=v"], ids=repr
)
def test_encode_rejects_metadata_that_is_not_a_map_of_strings(metadata: Any) -> None:
    with pytest.raises(SchemaError, match="SettlementCommand"):
        encode("SettlementCommand", {**COMMAND, "metadata": metadata})


def test_encode_rejects_an_unknown_record_name() -> None:
    with pytest.raises(SchemaError, match="SettlementRefund"):
        encode("SettlementRefund", EVENT)


# --- decoding -------------------------------------------------------------------------------

GOOD = encode("SettlementEvent", EVENT)


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc3", b"\xc3\x01\x00", b"\xc3\x00" + GOOD[2:], b"\x00\x01" + GOOD[2:], GOOD[10:]],
    ids=["empty", "half marker", "short header", "C3 00", "00 01", "no header"],
)
def test_decode_rejects_a_wrong_marker_or_short_header(data: bytes) -> None:
    with pytest.raises(SchemaError, match="not Avro single-object encoded"):
        decode(data, "SettlementEvent")


def test_decode_rejects_an_unknown_fingerprint() -> None:
    for position in range(2, 10):
        data = bytearray(GOOD)
        data[position] ^= 0x01
        with pytest.raises(SchemaError, match="unknown writer schema fingerprint"):
            decode(bytes(data), "SettlementEvent")


def test_decode_rejects_a_big_endian_fingerprint() -> None:
    fp = int.from_bytes(GOOD[2:10], "little")
    with pytest.raises(SchemaError, match="unknown writer schema fingerprint"):
        decode(MARKER + fp.to_bytes(8, "big") + GOOD[10:], "SettlementEvent")


def test_decode_rejects_every_truncated_body() -> None:
    for length in range(10, len(GOOD)):
        with pytest.raises(SchemaError, match="body does not decode"):
            decode(GOOD[:length], "SettlementEvent")


def test_decode_rejects_bytes_after_the_body() -> None:
    with pytest.raises(SchemaError, match="1 bytes after the body"):
        decode(GOOD + b"\x00", "SettlementEvent")


def test_decode_rejects_a_garbled_body() -> None:
    with pytest.raises(SchemaError, match="body does not decode"):
        decode(GOOD[:10] + b"\x02\xff\xfe\xfd" + GOOD[14:], "SettlementEvent")  # bad UTF-8


def test_decode_rejects_a_message_of_another_record() -> None:
    with pytest.raises(SchemaError, match="expected a SettlementEvent"):
        decode(encode("SettlementCommand", COMMAND), "SettlementEvent")


def test_catalog_refuses_a_schemas_directory_it_cannot_trust(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match=r"no <Name>\.avsc"):
        SchemaCatalog(tmp_path)
    event = (SCHEMAS_DIR / "SettlementEvent.avsc").read_text()
    (tmp_path / "SettlementCommand.avsc").write_text(event)
    with pytest.raises(SchemaError, match="record SettlementEvent where SettlementCommand"):
        SchemaCatalog(tmp_path)
    (tmp_path / "SettlementCommand.avsc").unlink()
    (tmp_path / "SettlementEvent.avsc").write_text(event)
    (tmp_path / "history" / "SettlementEvent").mkdir(parents=True)
    (tmp_path / "history" / "SettlementEvent" / "latest.avsc").write_text(event)
    with pytest.raises(SchemaError, match=r"v<N>\.avsc"):
        SchemaCatalog(tmp_path)


# --- property: every valid record round-trips exactly ---------------------------------------

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
LONG = st.integers(-(2**63), 2**63 - 1)
MAYBE_TEXT = st.none() | TEXT
INSTANT = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
EVENT_TYPES = (
    st.sampled_from(["created", "submitted", "paid", "failed", "reversed", "needs_review"]) | TEXT
)

EVENTS = st.fixed_dictionaries(
    {
        "event_id": st.uuids().map(str),
        "settlement_id": st.uuids().map(str),
        "tenant": TEXT,
        "reference": TEXT,
        "type": EVENT_TYPES,
        "sequence": st.integers(1, 2**31 - 1),
        "amount": LONG,
        "currency": st.sampled_from(["EUR", "USD", "JPY", "GBP"]) | TEXT,
        "occurred_at": INSTANT,
        "status": MAYBE_TEXT,
        "rail_reference": MAYBE_TEXT,
        "reason": MAYBE_TEXT,
        "rail": MAYBE_TEXT,
    }
)
COMMANDS = st.fixed_dictionaries(
    {
        "tenant": TEXT,
        "idempotency_key": st.uuids().map(str) | TEXT,
        "reference": TEXT,
        "payee": TEXT,
        "destination": TEXT,
        "amount": st.integers(1, 2**63 - 1) | LONG,
        "currency": TEXT,
        "rail": MAYBE_TEXT,
        "metadata": st.dictionaries(TEXT, TEXT, max_size=8),
    }
)


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_any_valid_event_round_trips_exactly(event: dict[str, Any]) -> None:
    assert decode(encode("SettlementEvent", event), "SettlementEvent") == event


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_any_valid_command_round_trips_exactly(command: dict[str, Any]) -> None:
    assert decode(encode("SettlementCommand", command), "SettlementCommand") == command


def test_uuid_strings_are_kept_as_strings() -> None:
    event = {**EVENT, "event_id": str(uuid.uuid4())}
    assert isinstance(decode(encode("SettlementEvent", event), "SettlementEvent")["event_id"], str)
