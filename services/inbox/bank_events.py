"""A bank report read as rail events: one per transaction the report decides, in the shape
the inbox stores and applies every rail event in. Pure: no I/O.

    report     what it says of a transfer                   event           signal
    pain.002   TxSts ACSC (the debtor's account debited)      sepa.booked     confirmed
    pain.002   TxSts RJCT, with its reason                    sepa.rejected   failed
    pain.002   group or block RJCT without transactions:      sepa.rejected   failed
               every transfer of the file or block
    camt.054   a booked DBIT entry (PMNT/ICDT/ESCT), each     sepa.booked     confirmed
    camt.053   transfer of a batch entry by its TxDtls
    camt.054   a booked CRDT entry returning a transfer       sepa.returned   reversed
    camt.053   (PMNT/ICDT/RRTN: the original EndToEndId,
               the reason in RtrInf/Rsn/Cd)

Other statuses (ACTC, ACCP, PDNG, ...) and entries (charges, pending ones, money that is not
one of our transfers) decide nothing here; reconciliation reads them. A transaction is named
by its EndToEndId (services/domain/sepa.py), which is the settlement's rail reference, so the
inbox matches it as it matches a Stripe transfer id; what a report does not state of the
money (a status report carries no amount, few entries name the payee's account) is taken
from what was sent, and what it does state must agree with it (`webhook_match`).

Each event's id names the report, the transaction and what was decided, reason included, so
the settlement's transition says why (`sepa.rejected pain.002/<MsgId>/<EndToEndId>/RJCT-AC04`).
One change reported by several reports (ACSC, then the camt.054 entry, then the statement)
shares its change key, and only its first report is applied.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from services.adapters.sepa.camt053 import StatementReport
from services.adapters.sepa.camt054 import NotificationReport
from services.adapters.sepa.camt_entries import CreditDebit, Entry, EntryStatus
from services.adapters.sepa.pain002 import PaymentStatus, StatusReport
from services.domain.sepa import SEPA_CURRENCY, settlement_of

BOOKED, REJECTED, RETURNED = "sepa.booked", "sepa.rejected", "sepa.returned"
CHARGES = "CHRG"


class SentTransfer(NamedTuple):
    """What settle sent for one EndToEndId, as its instruction records it."""

    amount: int
    destination: str


class Decided(NamedTuple):
    """One transaction a report decides, before it is written as an event."""

    end_to_end_id: str
    event_type: str
    code: str  # what the bank said: ACSC, BOOK, RJCT-AC04, RRTN-MD07
    amount: int | None = None  # what the report states of the money, if anything
    returned: int | None = None  # for a return: the amount sent back


Report = StatusReport | NotificationReport | StatementReport


def decided_in(report: Report, files: Mapping[str, Sequence[str]]) -> list[Decided]:
    """Every transaction `report` decides; `files` gives the EndToEndIds of each of our files
    by MsgId and of each payment block by PmtInfId (for a rejection of a whole group)."""
    if isinstance(report, StatusReport):
        return list(_statuses(report, files))
    if isinstance(report, NotificationReport):
        entries = [e for n in report.notifications for e in n.entries]
    else:
        entries = [e for s in report.statements for e in s.entries]
    return [d for entry in entries for d in _bookings(entry)]


def event_bodies(
    kind: str,
    msg_id: str,
    decided: Sequence[Decided],
    sent: Mapping[str, SentTransfer],
    created: int,
) -> list[bytes]:
    """Each decided transaction of ours as the body of a rail event; a transaction whose
    EndToEndId is not one of settle's is left to reconciliation."""
    bodies = []
    for d in decided:
        settlement_id = settlement_of(d.end_to_end_id)
        if settlement_id is None:
            continue
        what = sent.get(d.end_to_end_id)
        obj: dict[str, Any] = {
            "id": d.end_to_end_id,
            "amount": d.amount if d.amount is not None else (what.amount if what else None),
            "currency": SEPA_CURRENCY,
            "destination": what.destination if what else None,
            "metadata": {"settlement_id": settlement_id},
        }
        if d.returned is not None:
            obj["amount_reversed"] = d.returned
        event = {
            "id": f"{kind}/{msg_id}/{d.end_to_end_id}/{d.code}",
            "type": d.event_type,
            "created": created,
            "data": {"object": obj},
        }
        bodies.append(orjson.dumps(event))
    return bodies


def _statuses(report: StatusReport, files: Mapping[str, Sequence[str]]) -> Iterator[Decided]:
    stated = set()
    for tx in report.transactions:
        stated.add(tx.end_to_end_id)
        if tx.status is PaymentStatus.REJECTED:
            yield Decided(tx.end_to_end_id, REJECTED, f"RJCT-{tx.reason or 'NARR'}")
        elif tx.status is PaymentStatus.ACCEPTED_SETTLEMENT_COMPLETED:
            yield Decided(tx.end_to_end_id, BOOKED, "ACSC")
    rejected_blocks = [b for b in report.blocks if b.status is PaymentStatus.REJECTED]
    for block in rejected_blocks:
        for e2e in files.get(block.payment_info_id, ()):
            if e2e not in stated:
                stated.add(e2e)
                yield Decided(e2e, REJECTED, f"RJCT-{block.reason or 'NARR'}")
    if report.group_status is PaymentStatus.REJECTED:
        for e2e in files.get(report.original_msg_id, ()):
            if e2e not in stated:
                yield Decided(e2e, REJECTED, f"RJCT-{report.group_reason or 'NARR'}")


def _bookings(entry: Entry) -> Iterator[Decided]:
    if entry.status is not EntryStatus.BOOKED or entry.reversal:
        return
    if entry.code is not None and entry.code.subfamily == CHARGES:
        return
    alone = len(entry.transactions) == 1
    for tx in entry.transactions:
        if tx.end_to_end_id is None:
            continue
        amount = tx.amount if tx.amount is not None else (entry.amount if alone else None)
        if entry.direction is CreditDebit.DEBIT and tx.return_reason is None:
            yield Decided(tx.end_to_end_id, BOOKED, "BOOK", amount)
        elif entry.direction is CreditDebit.CREDIT and tx.returned_end_to_end_id is not None:
            yield Decided(tx.end_to_end_id, RETURNED, f"RRTN-{tx.return_reason}", returned=amount)
