"""What the checker reads, as plain values: the pure checks take these and nothing else."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple


class Offenders(NamedTuple):
    """Rows a set-based query found wrong: how many, and the first few ids."""

    total: int
    first: tuple[str, ...]


NONE = Offenders(0, ())


class SettlementFact(NamedTuple):
    """One settlement with its audit trail, as stored."""

    id: str
    tenant: str
    amount: int  # minor units
    currency: str
    status: str  # settlements.status
    reason: str | None
    history: tuple[str, ...]  # settlement_transitions.to_status, by sequence
    sequences: tuple[int, ...]  # settlement_transitions.sequence, ascending
    # settlement_transitions.from_status, by sequence (None for booking; equal to the
    # history's status for a step that recorded a rail reference); () reads as all moves.
    sources: tuple[str | None, ...] = ()
    amount_reversed: int = 0  # minor units come back (settlements.amount_reversed)
    rail: str | None = None  # the rail that pays it (settlements.rail)


class EventFact(NamedTuple):
    """One SettlementEvent read from Kafka (after dedupe by event_id)."""

    sequence: int
    type: str
    status: str | None


@dataclass(frozen=True)
class RailFacts:
    """Effects at the rail per settlement id, and whether the count is complete."""

    effects: Mapping[str, int]
    exhaustive: bool  # True when the rail counts every object it made (the simulator)
    source: str  # "simulator <url>" or "stripe <base>"


@dataclass(frozen=True)
class DatabaseFacts:
    """Everything read from PostgreSQL, aggregated there."""

    settlements: Mapping[str, SettlementFact]
    nets: Mapping[str, Mapping[str, int]]  # settlement id -> account id -> net, zeros left out
    transferred: frozenset[str]  # settlements whose rail instruction is `transferred`
    first_unpublished: Mapping[str, int]  # settlement id -> lowest unpublished outbox sequence
    stale_outbox: Offenders  # unpublished outbox rows older than the bound (event ids)
    unapplied_webhooks: Offenders  # inbox rows `received`, no reason, older than the bound
    unexplained_webhooks: Offenders  # parked/dead/mismatch rows without a reason (or sides)
    unbalanced_currencies: Offenders  # currencies whose postings do not sum to zero
    unbalanced_entries: Offenders  # journal entries not summing to zero per currency
    balance_mismatches: Offenders  # accounts whose shard sum differs from their postings
    webhooks_applied_twice: Offenders  # settlement (or rail event) ids of repeated changes
    # Settlements whose rail instruction ended `failed`: the rail refused it or it was never
    # sent, so the rail must show nothing for them (the books were reversed).
    instruction_failed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EventLogFacts:
    """The events topic read from the beginning to the end offsets taken at the start."""

    topic: str
    by_settlement: Mapping[str, Mapping[str, EventFact]]  # settlement id -> event id -> event
    messages: int
    undecodable: tuple[str, ...] = field(default=())  # "partition:offset" of bad messages
