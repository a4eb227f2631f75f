"""Every released schema version stays readable by the current one; bad changes are caught."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastavro.utils import generate_many

from services.contracts.avro import SCHEMAS_DIR, SchemaCatalog, check_backward_compatible
from services.domain.errors import SchemaError

NAMES = sorted(path.stem for path in SCHEMAS_DIR.glob("*.avsc"))
CATALOG = SchemaCatalog(SCHEMAS_DIR)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _versions(root: Path, name: str) -> list[Path]:
    return sorted((root / "history" / name).glob("v*.avsc"), key=lambda p: int(p.stem[1:]))


def _kept() -> list[tuple[str, Path]]:
    return [(name, path) for name in NAMES for path in _versions(SCHEMAS_DIR, name)]


def _compatibility_problems(root: Path) -> list[str]:
    """What the release rules forbid in a schemas directory; the tests below run it on ours."""
    problems = []
    for current_path in sorted(root.glob("*.avsc")):
        name, current = current_path.stem, _json(current_path)
        versions = _versions(root, name)
        if [p.stem for p in versions] != [f"v{n}" for n in range(1, len(versions) + 1)]:
            problems.append(f"{name}: history is not v1..vN: {[p.name for p in versions]}")
        if not versions or _json(versions[-1]) != current:
            problems.append(f"{name}: {current_path.name} is not the newest history version")
        for old in versions:
            problems += [f"{old}: {p}" for p in check_backward_compatible(current, _json(old))]
    return problems


def test_the_records_settle_sends_have_schemas() -> None:
    assert NAMES == ["SettlementCommand", "SettlementEvent"]
    assert CATALOG.names == NAMES


def test_our_schemas_follow_the_release_rules() -> None:
    assert _compatibility_problems(SCHEMAS_DIR) == []


@pytest.mark.parametrize("name", NAMES)
def test_current_schema_is_the_newest_history_version(name: str) -> None:
    versions = _versions(SCHEMAS_DIR, name)
    assert versions, f"schemas/history/{name}/ holds no version"
    assert _json(SCHEMAS_DIR / f"{name}.avsc") == _json(versions[-1])
    assert CATALOG.history(name) == [_json(path) for path in versions]


@pytest.mark.parametrize(("name", "path"), _kept(), ids=lambda v: getattr(v, "name", v))
def test_current_schema_resolves_every_kept_version(name: str, path: Path) -> None:
    assert check_backward_compatible(_json(SCHEMAS_DIR / f"{name}.avsc"), _json(path)) == []


@pytest.mark.parametrize(("name", "path"), _kept(), ids=lambda v: getattr(v, "name", v))
def test_data_written_with_every_kept_version_decodes_into_the_current_schema(
    name: str, path: Path
) -> None:
    old = _json(path)
    current_fields = {f["name"]: f for f in _json(SCHEMAS_DIR / f"{name}.avsc")["fields"]}
    old_fields = {f["name"] for f in old["fields"]}
    for record in generate_many(old, 200):
        decoded = CATALOG.decode(CATALOG.encode(old, record), name)
        assert decoded.keys() == current_fields.keys()
        for field, value in decoded.items():
            if field in old_fields:
                assert _same(value, record[field]), field
            else:
                assert value == current_fields[field]["default"], field


def _same(decoded: Any, written: Any) -> bool:
    """Equal, allowing for what resolution and logical types change on the way."""
    if isinstance(decoded, datetime) and isinstance(written, int):
        return (decoded - EPOCH) // timedelta(milliseconds=1) == written
    if isinstance(decoded, bytes) and isinstance(written, str):
        return decoded == written.encode()
    if isinstance(decoded, str) and isinstance(written, bytes):
        return decoded.encode() == written
    return bool(decoded == written)


# --- a second version, in a scratch schemas directory ----------------------------------------


def _release(root: Path, name: str, *versions: dict[str, Any]) -> None:
    (root / "history" / name).mkdir(parents=True, exist_ok=True)
    for number, schema in enumerate(versions, start=1):
        (root / "history" / name / f"v{number}.avsc").write_text(json.dumps(schema))
    (root / f"{name}.avsc").write_text(json.dumps(versions[-1]))


def _event() -> dict[str, Any]:
    return copy.deepcopy(_json(SCHEMAS_DIR / "SettlementEvent.avsc"))


def _field(schema: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in schema["fields"] if f["name"] == name)


def _v2_compatible() -> dict[str, Any]:
    v2 = _event()
    _field(v2, "sequence")["type"] = "long"  # a promotion
    v2["fields"].append(
        {"name": "fee", "type": ["null", "long"], "default": None, "doc": "The rail's fee."}
    )
    return v2


def test_a_compatible_second_version_reads_first_version_messages(tmp_path: Path) -> None:
    v1, v2 = _event(), _v2_compatible()
    _release(tmp_path, "SettlementEvent", v1, v2)
    assert _compatibility_problems(tmp_path) == []
    catalog = SchemaCatalog(tmp_path)
    old = next(generate_many(v1, 1))
    decoded = catalog.decode(catalog.encode(v1, old), "SettlementEvent")
    assert decoded["fee"] is None
    assert decoded["sequence"] == old["sequence"]
    assert catalog.decode(catalog.encode("SettlementEvent", decoded), "SettlementEvent") == decoded


def test_a_version_not_kept_in_history_is_unknown(tmp_path: Path) -> None:
    _release(tmp_path, "SettlementEvent", _event())
    catalog = SchemaCatalog(tmp_path)
    message = catalog.encode(_v2_compatible(), next(generate_many(_v2_compatible(), 1)))
    with pytest.raises(SchemaError, match="unknown writer schema fingerprint"):
        catalog.decode(message, "SettlementEvent")


def test_an_incompatible_current_schema_fails_the_rules_and_the_decoder(tmp_path: Path) -> None:
    v1, v2 = _event(), _event()
    v2["fields"].append({"name": "fee", "type": "long", "doc": "No default: breaks v1 data."})
    _release(tmp_path, "SettlementEvent", v1, v2)
    assert _compatibility_problems(tmp_path) == [
        f"{tmp_path}/history/SettlementEvent/v1.avsc: io.settle.SettlementEvent.fee:"
        " not in the writer schema and has no default"
    ]
    catalog = SchemaCatalog(tmp_path)
    message = catalog.encode(v1, next(generate_many(v1, 1)))
    with pytest.raises(SchemaError, match="body does not decode"):
        catalog.decode(message, "SettlementEvent")


def test_the_rules_catch_an_unrecorded_change(tmp_path: Path) -> None:
    _release(tmp_path, "SettlementEvent", _event())
    changed = _v2_compatible()
    (tmp_path / "SettlementEvent.avsc").write_text(json.dumps(changed))
    assert _compatibility_problems(tmp_path) == [
        "SettlementEvent: SettlementEvent.avsc is not the newest history version"
    ]
    (tmp_path / "history" / "SettlementEvent" / "v3.avsc").write_text(json.dumps(changed))
    assert _compatibility_problems(tmp_path) == [
        "SettlementEvent: history is not v1..vN: ['v1.avsc', 'v3.avsc']"
    ]


# --- the checker itself: changes it must refuse, and changes it must let through -------------

Change = Callable[[dict[str, Any]], None]


def _changed(change: Change) -> dict[str, Any]:
    schema = _event()
    change(schema)
    return schema


def _set_type(field: str, new_type: Any, drop_default: bool = False) -> Change:
    def change(schema: dict[str, Any]) -> None:
        _field(schema, field)["type"] = new_type
        if drop_default:
            _field(schema, field).pop("default")

    return change


def _add(field: dict[str, Any]) -> Change:
    return lambda schema: schema["fields"].append(field)


def _remove(name: str) -> Change:
    def change(schema: dict[str, Any]) -> None:
        schema["fields"] = [f for f in schema["fields"] if f["name"] != name]

    return change


def _rename_field(old: str, new: str) -> Change:
    return lambda schema: _field(schema, old).__setitem__("name", new)


BREAKING: dict[str, tuple[Change, str]] = {
    "add a field without default": (
        _add({"name": "fee", "type": "long"}),
        "fee: not in the writer",
    ),
    "long to int": (_set_type("amount", "int"), "amount: writer long cannot be read as int"),
    "string to long": (_set_type("currency", "long"), "currency: writer string cannot be"),
    "nullable to required": (
        _set_type("reason", "string", drop_default=True),
        "reason<null>: writer null cannot be read as string",
    ),
    "string to enum": (
        _set_type("type", {"type": "enum", "name": "EventType", "symbols": ["paid"]}),
        "type: writer string cannot be read as enum",
    ),
    "string to map": (
        _set_type("tenant", {"type": "map", "values": "int"}),
        "tenant: writer string cannot be read as map",
    ),
    "millis to micros": (
        _set_type("occurred_at", {"type": "long", "logicalType": "timestamp-micros"}),
        "logicalType timestamp-millis read as timestamp-micros",
    ),
    "rename a field": (_rename_field("reference", "ref"), "ref: not in the writer"),
    "rename the record": (
        lambda schema: schema.__setitem__("name", "SettlementHappened"),
        "cannot be read as record io.settle.SettlementHappened",
    ),
}


@pytest.mark.parametrize(("change", "says"), BREAKING.values(), ids=BREAKING.keys())
def test_checker_refuses_a_change_old_data_cannot_take(change: Change, says: str) -> None:
    problems = check_backward_compatible(_changed(change), _event())
    assert problems
    assert any(says in problem for problem in problems), problems


def test_checker_refuses_removing_a_field_old_readers_need() -> None:
    # a removal is invisible to the new reader; it breaks readers still on the old version
    new = _changed(_remove("amount"))
    assert check_backward_compatible(new, _event()) == []
    assert check_backward_compatible(_event(), new) == [
        "io.settle.SettlementEvent.amount: not in the writer schema and has no default"
    ]


def test_checker_refuses_narrowing_inside_containers_and_nested_records() -> None:
    def fees(amount_type: str, extra: list[dict[str, Any]]) -> Change:
        item = {
            "type": "record",
            "name": "Fee",
            "fields": [{"name": "amount", "type": amount_type}],
        }
        item["fields"] += extra
        return _add({"name": "fees", "type": {"type": "array", "items": item}, "default": []})

    old = _changed(fees("long", []))
    narrowed = _changed(fees("int", []))
    grown = _changed(fees("long", [{"name": "kind", "type": "string"}]))
    assert check_backward_compatible(narrowed, old) == [
        "io.settle.SettlementEvent.fees[].amount: writer long cannot be read as int"
    ]
    assert check_backward_compatible(grown, old) == [
        "io.settle.SettlementEvent.fees[].kind: not in the writer schema and has no default"
    ]
    assert check_backward_compatible(old, narrowed) == []  # int to long: a promotion


COMPATIBLE: dict[str, Change] = {
    "add a nullable field with default": _add(
        {"name": "rail", "type": ["null", "string"], "default": None}
    ),
    "add a field with a value default": _add({"name": "fee", "type": "long", "default": 0}),
    "int to long": _set_type("sequence", "long"),
    "int to double": _set_type("sequence", "double"),
    "long to double": _set_type("amount", "double"),
    "string to bytes": _set_type("tenant", "bytes"),
    "required to nullable": _set_type("reason", ["null", "string", "long"]),
    "remove a field": _remove("status"),
    "rename a field keeping an alias": lambda schema: _field(schema, "reference").update(
        {"name": "ref", "aliases": ["reference"]}
    ),
    "doc only": lambda schema: schema.__setitem__("doc", "Reworded."),
}


@pytest.mark.parametrize("change", COMPATIBLE.values(), ids=COMPATIBLE.keys())
def test_checker_lets_a_compatible_change_through(change: Change) -> None:
    assert check_backward_compatible(_changed(change), _event()) == []


def test_checker_reports_a_schema_that_does_not_parse() -> None:
    assert check_backward_compatible({"type": "record", "name": "X", "fields": [{}]}, "int")
    assert check_backward_compatible(_event(), {"type": "nonsense"})


@pytest.mark.parametrize(
    ("reader", "writer", "compatible"),
    [
        (["null", "long"], "int", True),  # reader union: first branch by promotion
        ("long", ["null", "long"], False),  # writer union: its null branch has nowhere to go
        (["long", "string"], ["string", "int"], True),
        ({"type": "map", "values": "double"}, {"type": "map", "values": "float"}, True),
        ({"type": "array", "items": "float"}, {"type": "array", "items": "double"}, False),
        (
            {"type": "enum", "name": "E", "symbols": ["A"]},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            False,
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            True,
        ),
        (
            {"type": "fixed", "name": "F", "size": 16},
            {"type": "fixed", "name": "F", "size": 8},
            False,
        ),
        (
            {"type": "fixed", "name": "F", "size": 8},
            {"type": "fixed", "name": "G", "size": 8},
            False,
        ),
    ],
)
def test_checker_follows_the_resolution_rules_for_other_types(
    reader: Any, writer: Any, compatible: bool
) -> None:
    assert (check_backward_compatible(reader, writer) == []) is compatible


def test_checker_terminates_on_recursive_records() -> None:
    def node(value_type: str) -> dict[str, Any]:
        return {
            "type": "record",
            "name": "Node",
            "fields": [
                {"name": "value", "type": value_type},
                {"name": "next", "type": ["null", "Node"], "default": None},
            ],
        }

    assert check_backward_compatible(node("long"), node("int")) == []
    assert check_backward_compatible(node("int"), node("long")) == [
        "Node.value: writer long cannot be read as int"
    ]
