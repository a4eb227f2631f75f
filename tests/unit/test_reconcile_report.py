"""The report an operator and a script read: counts per type, reason codes, one byte sequence."""

from __future__ import annotations

import json

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break
from services.domain.settlement import SettlementStatus
from services.reconcile.compare import compare
from services.reconcile.report import canonical_json, counts, report_document, with_breaks
from tests.unit.reconcile_cases import GRACE, NOW, settled, sid, transfer

T = BreakType


def test_the_document_counts_every_type_and_names_each_break_with_its_reason() -> None:
    ledger = [settled(1), settled(2, SettlementStatus.SUBMITTED, sent_at=NOW)]
    report = compare(ledger, [transfer(1, amount=1_250)], NOW, grace=GRACE)
    nostro = Break(T.BALANCE_MISMATCH, None, None, "balance", 1_000, 1_250, 250, "EUR")
    document = report_document(with_breaks(report, [nostro]))
    assert document["ok"] is False
    assert document["counts"] == {t.value: 0 for t in T} | {
        "amount_mismatch": 1,
        "balance_mismatch": 1,
    }
    assert document["breaks"] == [
        {
            "type": "balance_mismatch",
            "settlement_id": None,
            "rail_object_id": None,
            "expected": 1_000,
            "actual": 1_250,
            "currency": "EUR",
            "reason": "balance:+250",
        },
        {
            "type": "amount_mismatch",
            "settlement_id": sid(1),
            "rail_object_id": "tr_1",
            "expected": 1_000,
            "actual": 1_250,
            "currency": "EUR",
            "reason": "amount:+250",
        },
    ]
    assert document["pending"] == [
        {
            "settlement_id": sid(2),
            "rail_object_id": None,
            "would_be": "missing_at_rail",
            "age": 0,
            "bucket": "T+0s",
        }
    ]


def test_pending_items_alone_leave_the_report_ok() -> None:
    report = compare([settled(1, sent_at=NOW)], [], NOW, grace=GRACE)
    assert report.pending and report_document(report)["ok"] is True
    assert set(counts(report).values()) == {0}


def test_the_json_has_sorted_keys_no_spaces_and_exact_big_amounts() -> None:
    big = 2**63 - 1
    report = compare([settled(1, amount=big)], [transfer(1, amount=big - 1)], NOW, grace=GRACE)
    text = canonical_json(report_document(report))
    assert b" " not in text and text.startswith(b'{"breaks":[{"actual":9223372036854775806,')
    assert json.loads(text)["breaks"][0]["expected"] == big
    assert canonical_json(json.loads(text)) == text
