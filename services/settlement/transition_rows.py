"""The values of the guarded settlement write: a settlement as locked, a step as planned, the
rows it stores (one NamedTuple per table) and the event each step publishes (a move to
dispatching publishes none).

Each row type mirrors a composite type of migration 0003 (0005 adds `amount_reversed` to
`settlement_move`) field for field, so
`services/settlement/transitions.py` passes a list of them as one array parameter and its
statement reads them by column name. Booking builds its event with `settlement_event` too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from services.contracts import avro
from services.domain.ids import uuid7, uuid7_text
from services.domain.postings import AccountKind, Posting, entry_kind
from services.domain.settlement import SettlementStatus, Transition, publishes_event
from services.domain.trace_context import TraceContext


class SettlementMove(NamedTuple):
    """A `settlement_move`: one settlement's guarded update, from its locked row to its end."""

    id: uuid.UUID
    from_status: str  # as locked: what the guarded update expects to find
    from_version: int
    status: str  # after every step of the batch
    version: int
    reason: str | None  # the latest step's reason; None keeps the stored one
    rail_reference: str | None  # None keeps the stored one
    amount_reversed: int  # minor units come back in all, after every step of the batch


class TransitionRow(NamedTuple):
    """A `transition_row`: one audit row of `settlement_transitions`."""

    settlement_id: uuid.UUID
    sequence: int  # the settlement's version after the step, and its event's sequence
    from_status: str
    to_status: str  # from_status again for a step that records a rail reference
    reason: str | None
    actor: str  # who made the step: "relay-...", "inbox", an operator


class EntryRow(NamedTuple):
    """An `entry_row`: one journal entry, for a step that moves money."""

    id: uuid.UUID
    tenant: str
    settlement_id: uuid.UUID
    kind: str  # the target status (one entry per kind per settlement)
    # When the rail moved the money, if it said (a webhook's or statement's time); None: the
    # entry is effective when it is recorded.
    effective_at: datetime | None = None


class PostingRow(NamedTuple):
    """A `posting_row`: one line of a journal entry."""

    entry_id: uuid.UUID
    account_id: str
    amount: int  # signed minor units: debit positive, credit negative
    currency: str


class BalanceDelta(NamedTuple):
    """What one account's balance changes by; the shard it lands on is chosen on writing."""

    account_id: str
    delta: int  # signed minor units, never zero


class EventRow(NamedTuple):
    """An `event_row`: one outbox row of the events topic."""

    event_id: str  # a UUID in canonical text form, as the event's payload holds it
    settlement_id: uuid.UUID
    sequence: int
    payload: bytes  # the Avro SettlementEvent


class Rows(NamedTuple):
    """Everything one `write` stores, per table."""

    moves: list[SettlementMove]
    transitions: list[TransitionRow]
    entries: list[EntryRow]
    postings: list[PostingRow]
    deltas: list[BalanceDelta]  # in account order, the order their rows are locked in
    events: list[EventRow]


def settlement_event(
    event_id: uuid.UUID | str,
    settlement_id: uuid.UUID | str,
    tenant: str,
    reference: str,
    amount: int,
    currency: str,
    *,
    sequence: int,
    event_type: str,
    status: SettlementStatus,
    rail_reference: str | None,
    reason: str | None,
    occurred_at: datetime,
    rail: str | None = None,
) -> bytes:
    """The Avro SettlementEvent of a settlement's `sequence`-th step, as the outbox holds it."""
    return avro.encode(
        "SettlementEvent",
        {
            "event_id": str(event_id),
            "settlement_id": str(settlement_id),
            "tenant": tenant,
            "reference": reference,
            "type": event_type,
            "sequence": sequence,
            "amount": amount,
            "currency": currency,
            "occurred_at": occurred_at,
            "rail_reference": rail_reference,
            "reason": reason,
            "status": str(status),
            "rail": rail,
        },
    )


@dataclass(frozen=True, slots=True)
class Transitioned:
    """A step that was planned (and, once written, happened)."""

    settlement_id: str
    source: SettlementStatus
    target: SettlementStatus  # `source` again for a step that records a rail reference
    sequence: int  # the step's and its event's sequence
    postings: tuple[Posting, ...]
    amount_reversed: int = 0  # minor units come back in all after the step


@dataclass(slots=True)
class LockedSettlement:
    """A settlement row under this transaction's lock, as the planned steps leave it."""

    id: uuid.UUID
    tenant: str
    reference: str
    amount: int
    currency: str
    status: SettlementStatus  # after the steps planned so far
    version: int  # after the steps planned so far
    rail_reference: str | None  # after the steps planned so far
    held_in: AccountKind  # where its money sits now
    locked_status: SettlementStatus  # as locked: what the guarded update expects
    locked_version: int
    reason: str | None = None  # the latest step's reason, if any gave one
    amount_reversed: int = 0  # minor units come back so far, after the steps planned so far
    destination: str | None = None  # where the money was sent (the inbox matches webhooks to it)
    rail: str | None = None  # the rail that pays it
    trace: TraceContext | None = None  # the trace it was accepted under, for log lines
    accepted_at: datetime | None = None  # when it was booked (`created_at`), as locked


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """One move of a locked settlement, planned in memory, and who made it."""

    settlement: LockedSettlement
    step: Transition
    done: Transitioned
    actor: str
    published_reference: str | None  # the event's rail reference, as the row had it then
    effective_at: datetime | None = None  # when the rail moved the money, if it said


def rows_of(
    settlements: Iterable[LockedSettlement], steps: Iterable[PlannedStep], now: datetime
) -> Rows:
    """The rows that store every planned step of these settlements, minted now (ids, events)."""
    moves = [
        SettlementMove(
            s.id,
            s.locked_status,
            s.locked_version,
            s.status,
            s.version,
            s.reason,
            s.rail_reference,
            s.amount_reversed,
        )
        for s in settlements
        if s.version != s.locked_version
    ]
    transitions, entries, postings, events = [], [], [], []
    deltas: dict[str, int] = {}
    for m in steps:
        s, done = m.settlement, m.done
        transitions.append(
            TransitionRow(s.id, done.sequence, done.source, done.target, m.step.reason, m.actor)
        )
        if done.postings:
            entry = uuid7()
            entries.append(
                EntryRow(
                    entry,
                    s.tenant,
                    s.id,
                    entry_kind(done.target, done.amount_reversed),
                    m.effective_at,
                )
            )
            for p in done.postings:
                postings.append(PostingRow(entry, p.account_id, p.amount, p.currency))
                deltas[p.account_id] = deltas.get(p.account_id, 0) + p.amount
        if not publishes_event(done.source, done.target):
            continue
        event_id = uuid7_text()  # as text: the event names it so, and the outbox takes it
        payload = settlement_event(
            event_id,
            done.settlement_id,
            s.tenant,
            s.reference,
            s.amount,
            s.currency,
            sequence=done.sequence,
            event_type=m.step.event_type,
            status=m.step.target,
            rail_reference=m.published_reference,
            reason=m.step.reason,
            occurred_at=now,
            rail=s.rail,
        )
        events.append(EventRow(event_id, s.id, done.sequence, payload))
    balance = [BalanceDelta(a, deltas[a]) for a in sorted(deltas) if deltas[a] != 0]
    return Rows(moves, transitions, entries, postings, balance, events)
