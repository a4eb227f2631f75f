"""What reconciliation compares and what it reports: plain values, no I/O.

Both sides are brought to one vocabulary, the state of the money (`MoneyState`), so a
settlement's status and a rail object's can be compared:

    rail object                                   money state
    transfer, amount_reversed 0                   paid             (a transfer moves at once)
    transfer, amount_reversed == amount           reversed
    transfer, 0 < amount_reversed < amount        partly_reversed
    payout pending or in_transit                  in_flight
    payout paid                                   paid
    payout failed or canceled                     failed           (a returned payout too)

Times are Unix seconds, as the rail's `created`; amounts are int minor units.
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import NamedTuple

from services.domain.breaks import BreakType
from services.domain.payout import PayoutMethod
from services.domain.settlement import SettlementStatus


class MoneyState(StrEnum):
    """Where a rail object's money stands, in words both sides share."""

    IN_FLIGHT = "in_flight"
    PAID = "paid"
    FAILED = "failed"
    REVERSED = "reversed"
    PARTLY_REVERSED = "partly_reversed"


class RunKind(StrEnum):
    """Which window a reconciliation run covers; the values are stored."""

    INTRADAY = "intraday"  # since the last completed run, with overlap
    END_OF_DAY = "end_of_day"  # one whole day
    RECHECK = "recheck"  # what is still open or submitted, at its next re-check age
    STATEMENT = "statement"  # a counterparty's statement file


class RunStatus(StrEnum):
    """Where a reconciliation run stands; completed means every source was read cleanly."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class LedgerRecord(NamedTuple):
    """One settlement as the ledger books it."""

    settlement_id: str  # the settlement's UUID, canonical text
    tenant: str  # whose money it is
    amount: int  # minor units sent to the payee
    currency: str  # ISO 4217, upper case
    destination: str  # the connected account or bank account paid
    status: SettlementStatus  # the settlement's status now
    amount_reversed: int  # minor units the ledger booked as come back, cumulative
    rail_reference: str | None  # the rail object id the relay recorded, if any
    sent_at: int | None  # when it was first handed to the rail (dispatching); None: never
    due_on: date | None = None  # the day the rail is asked to book it (a bank file's), if any


class RailObject(NamedTuple):
    """One transfer or payout as the rail shows it."""

    object_id: str  # the rail's id, `tr_...` or `po_...`
    kind: PayoutMethod  # transfer or payout
    amount: int  # minor units the object moved
    amount_reversed: int  # minor units taken back (transfers; 0 for payouts)
    currency: str  # ISO 4217, upper case (the rail writes it in lower case)
    destination: str | None  # where it went; a payout may name none
    status: str | None  # a payout's status as the rail words it; None for a transfer
    created: int  # when the rail created it
    settlement_id: str | None  # `metadata.settlement_id`, if the object carries one
    arrival: int | None = None  # a payout's `arrival_date`: when it is due at the bank


class BalanceMove(NamedTuple):
    """One balance transaction at the rail."""

    move_id: str  # the rail's id, `txn_...`
    move_type: str  # Stripe's `type`: transfer, payout, transfer_refund, payout_failure...
    amount: int  # gross signed minor units: negative when money left the balance
    currency: str  # ISO 4217, upper case
    created: int  # when the rail booked it, Unix seconds
    fee: int = 0  # minor units the rail kept on top (the balance moves by amount - fee)
    source: str | None = None  # the object that moved the money: `tr_`, `trr_`, `po_`, `ch_`...
    settlement_id: str | None = None  # the settlement the source carries settle's mark for
    reverses: str | None = None  # for a transfer reversal, the transfer it took money back from
    ours: bool = True  # whether the source is settle's (read by the nostro pass)

    @property
    def net(self) -> int:
        """What the move did to the balance: the gross less the rail's fee."""
        return self.amount - self.fee


class Break(NamedTuple):
    """One disagreement, with the reason code an operator reads: which field, by how much."""

    break_type: BreakType  # the stable name of what disagrees
    settlement_id: str | None  # the settlement concerned; None for unknown or balance breaks
    rail_object_id: str | None  # the rail object concerned; None when the rail has none
    field: str  # what differed: amount, amount_reversed, currency, destination, status...
    expected: str | int | None  # what the ledger says
    actual: str | int | None  # what the rail says
    difference: int | None  # actual - expected, for amounts; None otherwise
    currency: str | None  # the currency of the amounts, when there is one


class Pending(NamedTuple):
    """An item still inside its expected settlement time: reported, not broken."""

    settlement_id: str  # the settlement waiting
    rail_object_id: str | None  # its rail object, if the rail shows one yet
    would_be: BreakType  # the break it becomes if it is still so after the grace period
    age: int  # seconds since it was handed to the rail
    bucket: str  # the last re-check age reached, e.g. "T+1h"


class Report(NamedTuple):
    """The outcome of comparing one set of inputs, in a stable order."""

    breaks: tuple[Break, ...]  # sorted by `break_key`
    pending: tuple[Pending, ...]  # sorted by settlement id, then rail object id
    # Objects on the rail account that are not settle's (no settlement named or claiming
    # them: another system's transfers, automatic payouts): counted and listed, never breaks.
    foreign: tuple[RailObject, ...] = ()  # by created, then id


def money_state(obj: RailObject) -> MoneyState:
    """The state of an object's money, read from its amounts and the rail's status word."""
    if obj.kind is PayoutMethod.TRANSFER:
        if obj.amount_reversed == 0:
            return MoneyState.PAID
        if obj.amount_reversed >= obj.amount:
            return MoneyState.REVERSED
        return MoneyState.PARTLY_REVERSED
    if obj.status == "paid":
        return MoneyState.PAID
    if obj.status in ("failed", "canceled"):
        return MoneyState.FAILED
    return MoneyState.IN_FLIGHT


def break_key(item: Break) -> tuple[str, str, str, str, str]:
    """The sort key that puts breaks in one order whatever order their inputs came in; without
    the values, it is also what makes a break seen again the same break."""
    return (
        item.settlement_id or "",
        item.rail_object_id or "",
        item.break_type.value,
        item.field,
        item.currency or "",
    )
