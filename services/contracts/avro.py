"""Avro single-object encoding of settle's Kafka messages, and the catalog of their schemas.

A message is, as the Avro specification's "Single-object encoding" defines it::

    C3 01 | 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema | Avro binary body

``SchemaCatalog`` loads ``schemas/``: ``<Name>.avsc`` is the current schema of a record, the one
settle writes and reads into; ``history/<Name>/v<N>.avsc`` are its released versions, writers a
reader still meets, found by fingerprint and resolved to the current schema. Records are dicts;
``timestamp-millis`` fields decode to aware UTC datetimes, encode from those or epoch millis.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, cast

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException, parse_schema
from fastavro.validation import ValidationError, validate

import services
from services.contracts.avro_body import BodyWriter, body_writer
from services.contracts.avro_schema import (
    Predicate,
    check_backward_compatible,
    conforms,
    crc64_avro,
    fingerprint,
)
from services.domain.errors import SchemaError

__all__ = [
    "MARKER",
    "SchemaCatalog",
    "SchemaRef",
    "Writer",
    "check_backward_compatible",
    "conforms",
    "crc64_avro",
    "decode",
    "default_catalog",
    "encode",
    "fingerprint",
]

MARKER = b"\xc3\x01"
HEADER_SIZE = len(MARKER) + 8
SCHEMAS_DIR = Path(services.__file__).resolve().parents[1] / "schemas"
_DECODE_ERRORS = (EOFError, IndexError, ValueError, OverflowError, SchemaResolutionError)


@dataclass(frozen=True, slots=True)
class Writer:
    """A record schema ready to write with: parsed once, header and field names at hand."""

    name: str  # unqualified record name, e.g. SettlementEvent
    schema: dict[str, Any]  # parsed by fastavro
    fingerprint: int
    header: bytes
    fields: frozenset[str]
    required: frozenset[str]  # the fields without a default
    fits: Predicate  # does a record fit, with no coercion at all
    body: BodyWriter | None  # the fast writer of a flat record's body, if the schema is flat

    @classmethod
    def of(cls, schema: Any) -> Writer:
        try:
            parsed = parse_schema(schema)
            fp = fingerprint(parsed)
            fits = conforms(parsed)
        except (SchemaParseException, ValueError, TypeError, KeyError) as exc:
            raise SchemaError(f"unusable Avro schema: {exc}") from exc
        if not isinstance(parsed, dict) or parsed.get("type") != "record":
            raise SchemaError("settle messages are Avro records; this schema is not one")
        fields = parsed["fields"]
        return cls(
            name=str(parsed["name"]).rsplit(".", 1)[-1],
            schema=parsed,
            fingerprint=fp,
            header=MARKER + fp.to_bytes(8, "little"),
            fields=frozenset(f["name"] for f in fields),
            required=frozenset(f["name"] for f in fields if "default" not in f),
            fits=fits,
            body=body_writer(parsed),
        )


SchemaRef = str | dict[str, Any] | Writer  # a record name, a JSON schema, or a Writer


class SchemaCatalog:
    """The current schema of each record, and every released writer schema by fingerprint."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else SCHEMAS_DIR
        self._current: dict[str, Writer] = {}
        self._history: dict[str, list[dict[str, Any]]] = {}
        self._writers: dict[int, Writer] = {}
        self._adhoc: dict[str, Writer] = {}
        for path in sorted(self.root.glob("*.avsc")):
            self._current[path.stem] = self._add(_load(path), path.stem, path)
        for folder in sorted(p for p in (self.root / "history").glob("*") if p.is_dir()):
            versions = sorted(folder.glob("*.avsc"), key=_version)
            self._history[folder.name] = [_load(path) for path in versions]
            for path, schema in zip(versions, self._history[folder.name], strict=True):
                self._add(schema, folder.name, path)
        if not self._current:
            raise SchemaError(f"no <Name>.avsc schemas in {self.root}")

    def _add(self, schema: dict[str, Any], name: str, path: Path) -> Writer:
        writer = Writer.of(schema)
        known = self._writers.setdefault(writer.fingerprint, writer)
        if writer.name != name or known.name != name:
            raise SchemaError(f"{path}: record {writer.name} where {name} was expected")
        return writer

    @property
    def names(self) -> list[str]:
        return sorted(self._current)

    def current(self, name: str) -> Writer:
        if (writer := self._current.get(name)) is None:
            raise SchemaError(f"no schema {name}.avsc in {self.root}")
        return writer

    def history(self, name: str) -> list[dict[str, Any]]:
        """The released versions of ``name`` as JSON, oldest first."""
        return list(self._history.get(name, []))

    def writer(self, fp: int) -> Writer:
        if (writer := self._writers.get(fp)) is None:
            raise SchemaError(f"unknown writer schema fingerprint {fp:016x}, not in {self.root}")
        return writer

    def encode(self, name_or_schema: SchemaRef, record: dict[str, Any]) -> bytes:
        """``record`` single-object encoded with the current schema of the record name given,
        or with the schema given (parsed once per distinct schema)."""
        writer = self._writer_for(name_or_schema)
        if writer.body is not None and (body := writer.body(record)) is not None:
            return writer.header + body
        if missing := writer.required - record.keys():
            raise SchemaError(f"{writer.name}: missing field(s) {', '.join(sorted(missing))}")
        if unknown := record.keys() - writer.fields:
            raise SchemaError(f"{writer.name}: unknown field(s) {', '.join(sorted(unknown))}")
        if not writer.fits(record):
            raise SchemaError(f"{writer.name}: invalid record: {_why(record, writer)}")
        buf = io.BytesIO()
        buf.write(writer.header)
        try:
            fastavro.schemaless_writer(buf, writer.schema, record)
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise SchemaError(f"{writer.name}: invalid record: {exc}") from exc
        return buf.getvalue()

    def _writer_for(self, schema: SchemaRef) -> Writer:
        if isinstance(schema, str):
            return self.current(schema)
        if isinstance(schema, Writer):
            return schema
        key = json.dumps(schema, sort_keys=True)
        if (writer := self._adhoc.get(key)) is None:
            writer = self._adhoc[key] = Writer.of(schema)
        return writer

    def decode(self, data: bytes, expected_name: str) -> dict[str, Any]:
        """The record in a single-object encoded message, read into the current schema of
        ``expected_name`` whichever released version wrote it."""
        reader = self.current(expected_name)
        if len(data) < HEADER_SIZE or data[:2] != MARKER:
            got = bytes(data[:HEADER_SIZE]).hex(" ") or "nothing"
            raise SchemaError(f"{expected_name}: not Avro single-object encoded: {got}")
        writer = self.writer(int.from_bytes(data[2:HEADER_SIZE], "little"))
        if writer.name != expected_name:
            raise SchemaError(f"expected a {expected_name}, the message holds a {writer.name}")
        buf = io.BytesIO(data)
        buf.seek(HEADER_SIZE)
        resolve = None if writer.fingerprint == reader.fingerprint else reader.schema
        try:
            record = fastavro.schemaless_reader(buf, writer.schema, resolve)
        except _DECODE_ERRORS as exc:
            raise SchemaError(f"{expected_name}: body does not decode: {exc!r}") from exc
        if buf.tell() != len(data):
            raise SchemaError(f"{expected_name}: {len(data) - buf.tell()} bytes after the body")
        return cast(dict[str, Any], record)


def _why(record: dict[str, Any], writer: Writer) -> str:
    """What does not fit, in fastavro's words where it has some (slow: on failures only)."""
    try:
        validate(record, writer.schema, raise_errors=True)
    except ValidationError as exc:
        return " ".join(str(exc).split())
    naive = [k for k, v in record.items() if isinstance(v, datetime) and v.tzinfo is None]
    if naive:
        return f"naive datetime in {', '.join(naive)}; give it a time zone"
    return "a nested value fits only by coercion (a naive datetime, a non-string map key)"


def _load(path: Path) -> dict[str, Any]:
    try:
        return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"{path}: {exc}") from exc


def _version(path: Path) -> int:
    if path.stem[:1] != "v" or not path.stem[1:].isdigit():
        raise SchemaError(f"{path}: history files are named v<N>.avsc")
    return int(path.stem[1:])


@cache
def default_catalog() -> SchemaCatalog:
    """The catalog of the repository's ``schemas/``, loaded once."""
    return SchemaCatalog()


def encode(name_or_schema: SchemaRef, record: dict[str, Any]) -> bytes:
    """``default_catalog().encode``, e.g. ``encode("SettlementEvent", event)``."""
    return default_catalog().encode(name_or_schema, record)


def decode(data: bytes, expected_name: str) -> dict[str, Any]:
    """``default_catalog().decode``."""
    return default_catalog().decode(data, expected_name)
