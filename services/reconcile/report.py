"""A comparison's report as one JSON document, identical byte for byte for identical inputs.

    {"ok": bool, "counts": {<every break type>: n}, "breaks": [...], "pending": [...]}

`ok` is true when there is no break (pending items are not breaks). Each break carries its
`type`, `settlement_id`, `rail_object_id`, `expected`, `actual`, `currency`, and the reason
code an operator reads: the field that differed and, for amounts, by how much
("amount:-500"). Keys are sorted and separators fixed, so the bytes depend on the content
only; amounts stay JSON integers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break, Pending, RailObject, Report, break_key


def with_breaks(report: Report, more: Iterable[Break]) -> Report:
    """`report` with `more` breaks (e.g. the nostro view's) added, still in the stable order."""
    return Report(tuple(sorted((*report.breaks, *more), key=break_key)), report.pending)


def counts(report: Report) -> dict[str, int]:
    """How many breaks of each type, every type named (zero included)."""
    found = {kind.value: 0 for kind in BreakType}
    for item in report.breaks:
        found[item.break_type.value] += 1
    return found


def reason_code(item: Break) -> str:
    """Which field differed and, for amounts, by how much: "currency", "amount:+500"."""
    return item.field if item.difference is None else f"{item.field}:{item.difference:+d}"


def break_document(item: Break) -> dict[str, Any]:
    """One break as the report and the export write it."""
    return {
        "type": item.break_type.value,
        "settlement_id": item.settlement_id,
        "rail_object_id": item.rail_object_id,
        "expected": item.expected,
        "actual": item.actual,
        "currency": item.currency,
        "reason": reason_code(item),
    }


def pending_document(item: Pending) -> dict[str, Any]:
    """One pending item as the report writes it."""
    return {
        "settlement_id": item.settlement_id,
        "rail_object_id": item.rail_object_id,
        "would_be": item.would_be.value,
        "age": item.age,
        "bucket": item.bucket,
    }


def foreign_document(obj: RailObject) -> dict[str, Any]:
    """One rail object out of scope, as a run's report lists it."""
    return {
        "rail_object_id": obj.object_id,
        "kind": obj.kind.value,
        "amount": obj.amount,
        "currency": obj.currency,
        "created": obj.created,
    }


def report_document(report: Report) -> dict[str, Any]:
    """The report as one JSON-ready object."""
    return {
        "ok": not report.breaks,
        "counts": counts(report),
        "breaks": [break_document(item) for item in report.breaks],
        "pending": [pending_document(item) for item in report.pending],
    }


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """`document` as UTF-8 JSON with sorted keys and no spaces: one text per content."""
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
