"""What a read of the ledger returns: settlements with their history and postings, account
balances and entries, as the HTTP layer renders them; and the port that reads them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal, Protocol

from pydantic import PlainSerializer

from services.domain.settlement import SettlementStatus
from services.ledger.responses import timestamp

SETTLEMENT_STATUSES = frozenset(status.value for status in SettlementStatus)
MAX_PAGE = 100

# Rendered like the POST response's timestamps, so a settlement reads the same either way.
Timestamp = Annotated[datetime, PlainSerializer(timestamp, return_type=str, when_used="json")]


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of a settlement's audit trail."""

    sequence: int  # 1-based, no gaps
    from_status: str | None  # None for the first transition
    to_status: str
    reason: str | None
    actor: str  # who moved it: ledger, relay, inbox, an operator
    occurred_at: Timestamp


@dataclass(frozen=True, slots=True)
class SettlementPosting:
    """One posting booked for a settlement, with the journal entry it belongs to."""

    entry_id: str
    kind: str  # the posting rule that booked the entry
    account_id: str
    amount: int  # signed minor units: debit +, credit -
    currency: str
    occurred_at: Timestamp  # when settle recorded it
    effective_at: Timestamp  # when the money moved: the rail's time when it said, else recorded


@dataclass(frozen=True, slots=True)
class SettlementSummary:
    """A settlement as a list shows it; the fields of the POST response and a few more."""

    object: Literal["settlement"]
    id: str
    reference: str
    payee: str
    destination: str
    amount: int  # minor units
    currency: str
    rail: str
    metadata: dict[str, str]
    status: str
    reason: str | None
    version: int  # transitions so far; the sequence of its latest event
    rail_idempotency_key: str | None  # None until a rail instruction exists
    rail_reference: str | None  # the rail's id of the transfer or payout, once known
    created_at: Timestamp
    updated_at: Timestamp


@dataclass(frozen=True, slots=True)
class Settlement(SettlementSummary):
    """A settlement with its full transition history and its postings."""

    transitions: list[Transition]
    postings: list[SettlementPosting]


@dataclass(frozen=True, slots=True)
class SettlementPage:
    """One page of settlements, newest first; `next_cursor` is None on the last page."""

    object: Literal["list"]
    data: list[SettlementSummary]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class AccountBalance:
    """An account's balance: the sum of its shards."""

    account: str
    currency: str
    balance: int  # signed minor units


@dataclass(frozen=True, slots=True)
class AccountEntry:
    """One posting on an account, with the journal entry it belongs to."""

    posting_id: int
    entry_id: str
    kind: str
    settlement_id: str | None
    amount: int  # signed minor units
    currency: str
    occurred_at: Timestamp  # when settle recorded it
    effective_at: Timestamp  # when the money moved: the rail's time when it said, else recorded


@dataclass(frozen=True, slots=True)
class EntryPage:
    """One page of an account's postings, newest first; `next_cursor` is None on the last."""

    object: Literal["list"]
    data: list[AccountEntry]
    next_cursor: str | None


class SettlementReader(Protocol):
    """The reads the HTTP layer needs; SettlementReads is the PostgreSQL one."""

    async def settlement(self, tenant: str, settlement_id: str) -> Settlement | None:
        """The settlement of `tenant` with id `settlement_id`, or None."""
        ...

    async def settlements(
        self,
        tenant: str,
        *,
        reference: str | None = None,
        status: str | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> SettlementPage:
        """A page of `tenant`'s settlements matching the filters, newest first."""
        ...

    async def balance(self, tenant: str, account: str) -> AccountBalance | None:
        """The balance of `account` if it belongs to `tenant`, else None."""
        ...

    async def entries(
        self, tenant: str, account: str, *, cursor: str | None = None, limit: int = 20
    ) -> EntryPage | None:
        """A page of `account`'s postings, newest first; None if not `tenant`'s account."""
        ...
