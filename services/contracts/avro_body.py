"""The Avro binary body of a flat record, written in plain Python from a plan made once per
schema: the outbox writes a SettlementEvent for every settlement step, and fastavro's general
writer spends most of that step's encoding time finding out, per datum, what the schema is.

``body_writer(schema)`` covers records whose fields are null, boolean, int, long, string,
bytes, a long with logicalType timestamp-millis, or a union of null, boolean, string and bytes
(``["null", "string"]``); for any other schema it answers None. The writer it builds writes
the same bytes as ``fastavro.schemaless_writer`` for a record holding every field with exactly
its type (the types ``avro_schema.conforms`` accepts, an aware datetime for a timestamp) and
answers None for any other record, so the caller takes fastavro's path, checks and errors.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

__all__ = ["BodyWriter", "body_writer"]

BodyWriter = Callable[[dict[str, Any]], bytes | None]
_FieldWriter = Callable[[bytearray, Any], bool]  # appends the datum; False if it does not fit
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LONG = 2**63
_INT = 2**31


def _varint(out: bytearray, n: int) -> None:
    """A long as Avro writes it: zig-zag, then 7 bits a byte, low bits first."""
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _integer(limit: int) -> _FieldWriter:
    def write(out: bytearray, d: Any) -> bool:
        if type(d) is not int or not -limit <= d < limit:
            return False
        if 0 <= d < 64:  # most counts and sequences: one byte
            out.append(d << 1)
        else:
            _varint(out, d)
        return True

    return write


def _timestamp_millis(out: bytearray, d: Any) -> bool:
    if type(d) is int:
        if not -_LONG <= d < _LONG:
            return False
        _varint(out, d)
        return True
    if not isinstance(d, datetime) or d.utcoffset() is None:
        return False
    # fastavro's own arithmetic: whole milliseconds since the epoch, sub-millis cut off.
    delta = d - _EPOCH
    _varint(out, (delta.days * 86400 + delta.seconds) * 1000 + delta.microseconds // 1000)
    return True


def _string(out: bytearray, d: Any) -> bool:
    if type(d) is not str:
        return False
    try:
        data = d.encode()
    except UnicodeEncodeError:  # a lone surrogate: fastavro's path reports it
        return False
    _length(out, data)
    return True


def _bytes(out: bytearray, d: Any) -> bool:
    if type(d) is not bytes:
        return False
    _length(out, d)
    return True


def _length(out: bytearray, data: bytes) -> None:
    if len(data) < 64:
        out.append(len(data) << 1)
    else:
        _varint(out, len(data))
    out += data


def _null(out: bytearray, d: Any) -> bool:
    return d is None


def _boolean(out: bytearray, d: Any) -> bool:
    if type(d) is not bool:
        return False
    out.append(1 if d else 0)
    return True


_PLAIN: dict[str, tuple[type, _FieldWriter]] = {
    "null": (type(None), _null),
    "boolean": (bool, _boolean),
    "string": (str, _string),
    "bytes": (bytes, _bytes),
}


def _union(branches: list[Any]) -> _FieldWriter | None:
    if not all(isinstance(b, str) and b in _PLAIN for b in branches):
        return None
    # Avro writes the branch's position as a long; positions under 64 take one byte.
    by_class = {_PLAIN[b][0]: (i << 1, _PLAIN[b][1]) for i, b in enumerate(branches)}
    if len(by_class) != len(branches) or len(branches) > 63:
        return None

    def write(out: bytearray, d: Any) -> bool:
        branch = by_class.get(type(d))
        if branch is None:
            return False
        out.append(branch[0])
        return branch[1](out, d)

    return write


def _field_writer(schema: Any) -> _FieldWriter | None:
    if isinstance(schema, list):
        return _union(schema)
    if isinstance(schema, dict):
        if schema.get("type") == "long" and schema.get("logicalType") == "timestamp-millis":
            return _timestamp_millis
        if "logicalType" in schema or not isinstance(schema.get("type"), str):
            return None
        schema = schema["type"]
    if schema in ("int", "long"):
        return _integer(_INT if schema == "int" else _LONG)
    return _PLAIN[schema][1] if schema in _PLAIN else None


def body_writer(schema: dict[str, Any]) -> BodyWriter | None:
    """A writer of the body of records of `schema` (parsed by fastavro), None where it holds
    a type outside the flat ones above."""
    if schema.get("type") != "record":
        return None
    fields: list[tuple[str, _FieldWriter]] = []
    for field in schema["fields"]:
        if (write := _field_writer(field["type"])) is None:
            return None
        fields.append((field["name"], write))
    count = len(fields)

    def write_body(record: dict[str, Any]) -> bytes | None:
        """The body of `record`; None unless it holds exactly the fields, each of its type."""
        if len(record) != count:
            return None
        out = bytearray()
        for name, write in fields:
            if name not in record or not write(out, record[name]):
                return None
        return bytes(out)

    return write_body
