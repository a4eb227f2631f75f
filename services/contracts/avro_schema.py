"""Avro schemas on their own: fingerprint, what data fits, and whether one reads another's data.

``fingerprint(schema)`` is the Avro specification's 64-bit Rabin fingerprint (CRC-64-AVRO) of
the schema's Parsing Canonical Form, the id single-object encoding puts before every body.

``conforms(schema)`` builds, once, a fast predicate telling whether a datum fits the schema
exactly: fastavro's writer truncates a float written as a long, takes True for 1 and wraps an
int out of range, and its ``validate`` re-parses the schema on every call.

``check_backward_compatible(reader, writer)`` walks both schemas as the Avro specification's
"Schema Resolution" section does when a reader decodes a writer's data, and lists every place
where that would fail:

- a reader record field absent from the writer must have a default (writer fields the reader
  lacks are skipped, so removing a field is fine for the reader);
- types must be equal or a promotion: int to long, float or double; long to float or double;
  float to double; string to bytes and bytes to string;
- a writer union is readable if each of its branches is; a reader union takes the first branch
  that matches the writer (exactly, else by promotion);
- records, enums and fixed match by unqualified name (or a reader alias); enum symbols the reader
  lacks need a reader default; fixed sizes must be equal; arrays, maps and records recurse.

One rule is stricter than Avro's: a changed ``logicalType`` (say timestamp-millis to
timestamp-micros) is reported, since the bytes still decode but mean something else.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from fastavro.schema import SchemaParseException, parse_schema, to_parsing_canonical_form

__all__ = ["CRC64_EMPTY", "check_backward_compatible", "conforms", "crc64_avro", "fingerprint"]

CRC64_EMPTY = 0xC15D213AA4D7A795


def _crc64_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        fp = byte
        for _ in range(8):
            fp = (fp >> 1) ^ (CRC64_EMPTY & -(fp & 1))
        table.append(fp)
    return tuple(table)


_TABLE = _crc64_table()


def crc64_avro(data: bytes) -> int:
    """The CRC-64-AVRO (Rabin) fingerprint of ``data``, unsigned."""
    fp = CRC64_EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _TABLE[(fp ^ byte) & 0xFF]
    return fp


def fingerprint(schema: Any) -> int:
    """CRC-64-AVRO of the schema's Parsing Canonical Form (JSON or parsed schema), unsigned."""
    return crc64_avro(to_parsing_canonical_form(schema).encode())


Predicate = Callable[[Any], bool]
_LIMITS = {"int": 2**31, "long": 2**63}
_PYTHON: dict[str, type] = {"null": type(None), "boolean": bool, "string": str, "bytes": bytes}
_LOGICAL = (date, time, Decimal, UUID)  # what fastavro's logical-type writers take


def conforms(schema: Any) -> Predicate:
    """A predicate: does a datum fit ``schema`` (JSON or parsed) with no coercion at all?"""
    named: dict[str, Any] = {}
    built: dict[str, Predicate] = {}

    def build(s: Any) -> Predicate:
        if isinstance(s, str) and s in named:
            return lambda d: built[s](d)  # late-bound: named types may be recursive
        if isinstance(s, dict) and not isinstance(s["type"], str):
            return build(s["type"])
        fits = plain(s)
        if isinstance(s, dict) and "logicalType" in s:
            return lambda d: fits(d) or _logical_value(d)
        return fits

    def plain(s: Any) -> Predicate:
        if isinstance(s, list):
            return _union(s, build)
        kind = s["type"] if isinstance(s, dict) else s
        if kind in _LIMITS:
            limit = _LIMITS[kind]
            return lambda d: type(d) is int and -limit <= d < limit
        if kind in ("float", "double"):
            return lambda d: type(d) in (int, float)
        if kind in _PYTHON:
            cls = _PYTHON[kind]
            return lambda d: type(d) is cls
        if kind == "array":
            items = build(s["items"])
            return lambda d: isinstance(d, list | tuple) and all(items(v) for v in d)
        if kind == "map":
            values = build(s["values"])
            return lambda d: (
                isinstance(d, dict) and all(type(k) is str and values(v) for k, v in d.items())
            )
        if kind == "enum":
            return lambda d: d in s["symbols"]
        if kind == "fixed":
            return lambda d: type(d) is bytes and len(d) == s["size"]
        fields = [(f["name"], build(f["type"]), "default" in f) for f in s["fields"]]

        def record(d: Any) -> bool:
            if not isinstance(d, dict):
                return False
            # A loop, not all() over a generator: records are checked on every message sent.
            for n, fits, default in fields:  # noqa: SIM110
                if not (fits(d[n]) if n in d else default):
                    return False
            return True

        built[s["name"]] = record
        return record

    return build(parse_schema(schema, named))


def _union(branches: list[Any], build: Callable[[Any], Predicate]) -> Predicate:
    # A union of plain types (["null", "string"], the common optional field) is one lookup
    # of the datum's exact type.
    kinds = [b if isinstance(b, str) else None for b in branches]
    if all(k in _PYTHON for k in kinds):
        classes = frozenset(_PYTHON[k] for k in kinds if k is not None)
        return lambda d: type(d) in classes
    checks = [build(b) for b in branches]
    return lambda d: any(fits(d) for fits in checks)


def _logical_value(datum: Any) -> bool:
    if isinstance(datum, datetime):
        return datum.tzinfo is not None  # a naive time is ambiguous: refuse it
    return isinstance(datum, _LOGICAL)


_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
_NAMED = {"record", "error", "enum", "fixed"}


def check_backward_compatible(reader_schema: Any, writer_schema: Any) -> list[str]:
    """Problems a reader using ``reader_schema`` would hit on data written with
    ``writer_schema``; empty when every such datum resolves. Takes JSON or parsed schemas."""
    try:
        reader_names: dict[str, Any] = {}
        writer_names: dict[str, Any] = {}
        reader = parse_schema(reader_schema, reader_names)
        writer = parse_schema(writer_schema, writer_names)
    except (SchemaParseException, ValueError, TypeError, KeyError) as exc:
        return [f"schema does not parse: {exc}"]
    checker = _Checker(reader_names, writer_names)
    checker.resolve(reader, writer, _name_of(writer) or "<root>")
    return checker.problems


def _name_of(schema: Any) -> str | None:
    return schema.get("name") if isinstance(schema, dict) else None


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Checker:
    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.problems: list[str] = []
        self._seen: set[tuple[str, str]] = set()  # named pairs under way: recursive types

    def resolve(self, reader: Any, writer: Any, path: str) -> None:
        reader, writer = _deref(reader, self.reader_names), _deref(writer, self.writer_names)
        if isinstance(writer, list):
            for branch in writer:
                self.resolve(reader, branch, f"{path}<{_kind(_deref(branch, self.writer_names))}>")
            return
        if isinstance(reader, list):
            branches = [_deref(b, self.reader_names) for b in reader]
            match = next((b for b in branches if self._matches(b, writer, exact=True)), None)
            match = match or next((b for b in branches if self._matches(b, writer)), None)
            if match is None:
                kinds = ", ".join(_describe(b) for b in branches)
                self.problems.append(
                    f"{path}: writer {_describe(writer)} not in reader union [{kinds}]"
                )
            else:
                self.resolve(match, writer, path)
            return
        if not self._matches(reader, writer):
            self.problems.append(
                f"{path}: writer {_describe(writer)} cannot be read as {_describe(reader)}"
            )
            return
        if _logical(reader) != _logical(writer):
            self.problems.append(
                f"{path}: logicalType {_logical(writer)} read as {_logical(reader)}"
            )
        kind = _kind(reader)
        if kind == "array":
            self.resolve(reader["items"], writer["items"], f"{path}[]")
        elif kind == "map":
            self.resolve(reader["values"], writer["values"], f"{path}{{}}")
        elif kind == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self.problems.append(f"{path}: enum symbols {missing} unknown to the reader")
        elif kind == "fixed" and reader["size"] != writer["size"]:
            self.problems.append(f"{path}: fixed size {writer['size']} read as {reader['size']}")
        elif kind in ("record", "error"):
            self._record(reader, writer, path)

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> None:
        pair = (reader["name"], writer["name"])
        if pair in self._seen:
            return
        self._seen.add(pair)
        written = {f["name"]: f for f in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", [])]
            source = next((written[n] for n in names if n in written), None)
            if source is not None:
                self.resolve(field["type"], source["type"], f"{path}.{field['name']}")
            elif "default" not in field:
                self.problems.append(
                    f"{path}.{field['name']}: not in the writer schema and has no default"
                )

    def _matches(self, reader: Any, writer: Any, exact: bool = False) -> bool:
        r_kind, w_kind = _kind(reader), _kind(writer)
        if r_kind in _NAMED or w_kind in _NAMED:
            aliases = {_short(a) for a in reader.get("aliases", [])} if r_kind in _NAMED else set()
            return r_kind == w_kind and _short(writer["name"]) in {_short(reader["name"]), *aliases}
        return r_kind == w_kind or (not exact and r_kind in _PROMOTIONS.get(w_kind, ()))


def _deref(schema: Any, names: dict[str, Any]) -> Any:
    """The definition behind a name, and ``{"type": X}`` wrappers of non-logical types unwrapped."""
    while True:
        if isinstance(schema, str) and schema in names:
            schema = names[schema]
        elif isinstance(schema, dict) and not isinstance(schema["type"], str):
            schema = schema["type"]
        elif isinstance(schema, dict) and schema["type"] in names:
            schema = names[schema["type"]]
        else:
            return schema


def _describe(schema: Any) -> str:
    name = schema.get("name") if isinstance(schema, dict) else None
    return f"{_kind(schema)} {name}" if name else _kind(schema)


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    kind = schema["type"] if isinstance(schema, dict) else schema
    return str(kind)


def _logical(schema: Any) -> str | None:
    return schema.get("logicalType") if isinstance(schema, dict) else None
