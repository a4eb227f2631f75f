"""The guarded write's planning, without a database: the rows a batch stores for its steps,
one named row per table, and the refusals it answers before writing anything."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from services.contracts import avro
from services.domain.postings import AccountKind
from services.domain.settlement import ReasonRequired
from services.domain.settlement import SettlementStatus as S
from services.settlement import transition_rows
from services.settlement.transition_rows import (
    BalanceDelta,
    EntryRow,
    EventRow,
    LockedSettlement,
    PostingRow,
    Rows,
    SettlementMove,
    TransitionRow,
)
from services.settlement.transitions import TransitionBatch

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
SID = uuid.UUID("01a21600-0000-7000-8000-000000000001")


def batch(status: S = S.ACCEPTED, reference: str | None = None) -> TransitionBatch:
    held = AccountKind.PAYABLE if status in (S.ACCEPTED, S.DISPATCHING) else AccountKind.PAID_OUT
    locked = LockedSettlement(
        SID, "acme", "ref-1", 700, "EUR", status, 2, reference, held, status, 2, rail="sepa"
    )
    return TransitionBatch({SID: locked})


def test_chained_moves_are_one_guarded_update_and_a_row_per_step_and_table() -> None:
    b = batch()
    assert b.move(SID, S.DISPATCHING, actor="relay") is not None
    assert b.move(SID, S.SUBMITTED, actor="relay", rail_reference="tr_1") is not None
    rows = b.rows(NOW)
    (move,) = rows.moves
    assert (move.from_status, move.from_version, move.status, move.version) == (
        "accepted",
        2,
        "submitted",
        4,
    )
    assert move.rail_reference == "tr_1"
    assert [(t.sequence, t.from_status, t.to_status) for t in rows.transitions] == [
        (3, "accepted", "dispatching"),
        (4, "dispatching", "submitted"),
    ]
    (entry,) = rows.entries  # dispatching moves no money
    assert entry.kind == "submitted" and {p.entry_id for p in rows.postings} == {entry.id}
    assert [(d.account_id, d.delta) for d in rows.deltas] == [
        ("acme:in_transit:EUR", 700),
        ("acme:payable:EUR", -700),
    ]
    # The move to dispatching publishes no event; its sequence number is left out.
    events = [avro.decode(e.payload, "SettlementEvent") for e in rows.events]
    assert [(e["sequence"], e["type"], e["rail_reference"]) for e in events] == [
        (4, "submitted", "tr_1"),
    ]


def test_needs_review_without_a_reason_is_refused_before_anything_is_planned() -> None:
    b = batch(S.SUBMITTED)
    with pytest.raises(ReasonRequired):
        b.move(SID, S.NEEDS_REVIEW, actor="relay")
    assert b.moves == []
    assert b.move(SID, S.NEEDS_REVIEW, actor="relay", reason="rail unclear") is not None


def test_an_illegal_move_or_an_unlocked_settlement_plans_nothing() -> None:
    b = batch(S.PAID)
    assert b.move(SID, S.SUBMITTED, actor="relay") is None
    assert b.move(uuid.uuid4(), S.PAID, actor="inbox") is None
    assert b.moves == [] and b.rows(NOW).moves == []


def test_a_rail_reference_is_a_step_that_keeps_the_status_and_moves_no_money() -> None:
    b = batch(S.PAID)
    done = b.record_rail_reference(SID, "tr_late", actor="relay")
    assert done is not None and (done.source, done.target, done.sequence) == (S.PAID, S.PAID, 3)
    assert b.record_rail_reference(SID, "tr_other", actor="relay") is None  # has one now
    rows = b.rows(NOW)
    assert rows.entries == [] and rows.postings == [] and rows.deltas == []
    event = avro.decode(rows.events[0].payload, "SettlementEvent")
    assert (event["type"], event["status"], event["rail_reference"]) == (
        "rail_reference_recorded",
        "paid",
        "tr_late",
    )


def test_a_known_step_is_stored_as_exactly_these_rows_and_event_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    minted = iter(range(1, 100))
    monkeypatch.setattr(
        transition_rows, "uuid7", lambda: uuid.UUID(f"{ID_STEM}01{next(minted):02d}")
    )
    monkeypatch.setattr(transition_rows, "uuid7_text", lambda: f"{ID_STEM}02{next(minted):02d}")
    b = batch()
    b.move(SID, S.DISPATCHING, actor="relay-1")
    b.move(SID, S.SUBMITTED, actor="relay-1", rail_reference="tr_1")
    rows = b.rows(datetime(2026, 11, 26, 12, 0, 0, 999999, tzinfo=UTC))
    entry = uuid.UUID(f"{ID_STEM}0101")  # the move to dispatching mints nothing
    assert rows == Rows(
        [SettlementMove(SID, "accepted", 2, "submitted", 4, None, "tr_1", 0)],
        [
            TransitionRow(SID, 3, "accepted", "dispatching", None, "relay-1"),
            TransitionRow(SID, 4, "dispatching", "submitted", None, "relay-1"),
        ],
        [EntryRow(entry, "acme", SID, "submitted")],
        [
            PostingRow(entry, "acme:payable:EUR", -700, "EUR"),
            PostingRow(entry, "acme:in_transit:EUR", 700, "EUR"),
        ],
        [BalanceDelta("acme:in_transit:EUR", 700), BalanceDelta("acme:payable:EUR", -700)],
        [EventRow(f"{ID_STEM}0202", SID, 4, SUBMITTED_EVENT)],
    )


ID_STEM = "01a21600-0000-7000-8000-00000000"
# The outbox payloads as published, byte for byte: marker and fingerprint, then event_id,
# settlement_id, tenant, reference, type, sequence, amount, currency, occurred_at (millis,
# the microseconds cut off), status, rail_reference, reason and rail.
_HEADER = bytes.fromhex("c301 476e9a5262646b91")
_IDS = b"H01a21600-0000-7000-8000-0000000002%02dH01a21600-0000-7000-8000-000000000001"
_AFTER_TYPE = bytes.fromhex("f80a 06") + b"EUR" + bytes.fromhex("ced7d0fbc268")
SUBMITTED_EVENT = (
    _HEADER
    + _IDS % 2
    + b"\x08acme\nref-1\x12submitted\x08"
    + _AFTER_TYPE
    + b"\x02\x12submitted\x02\x08tr_1\x00\x02\x08sepa"
)
