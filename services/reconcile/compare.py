"""Settlements against rail objects: match them, compare them, name each disagreement.

A rail object belongs to a settlement by its id (the settlement's `rail_reference`), else by
its `metadata.settlement_id`. Then, per settlement:

    objects   ledger status                        finding
    none      submitted, paid, (partly_)reversed   missing_at_rail
    any       accepted, or never sent              unknown_at_rail, one per object
    two+      any other                            duplicate_at_rail for each but the first
    one+      any other                            the first compared field by field

One rail object named as the reference of two settlements or more is `duplicate_in_ledger`
for each but the first by id (`first_claims`: the first claimant of each reference in the
whole ledger, which the caller reads; else among those given): the ledger books one payment
twice.

The first object is the one the settlement's reference names, else the earliest created.
Its amount, currency and destination (when the source states one) must equal the ledger's,
its money state must be one the status allows (`AGREES`), and for a transfer the amount
reversed must equal the ledger's. A payout still in transit once its arrival date and the
window in which it may still fail (`PAYOUT_FAILURE_WINDOW_SECONDS`) have passed is
`overdue`: it agrees with `submitted`, but it should have arrived or failed by now.
Objects no settlement explains are unknown_at_rail when they carry settle's mark (they name a
settlement the ledger does not have); without it they are another system's (automatic
payouts, transfers of destination charges or of other software on the same account): out of
scope, listed in the report's `foreign` and never a break. A missing object or a status drift of a
settlement handed to the rail less than the grace period ago is `pending`, not a break; a
drift to a state the rail shows only once it has acted (paid, failed, reversed) is proof,
pending only for its webhook's first minute (`PROVEN_DRIFT_SECONDS`); the rail never changes
amounts, so every other finding is a break at once. Where the rail's
records run to a business day (`booked_through`, the last day a bank statement closed)
and the settlement has a day it is due to be booked (`due_on`, its bank file's execution
date), a missing object is also pending while that day is after the records' last one.

The caller passes every settlement the rail objects name (and fetches by id every object a
reference names): an object whose settlement was left out would read as unknown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date
from typing import TypeVar

from services.domain.breaks import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_RECHECK_AGES,
    PAYOUT_FAILURE_WINDOW_SECONDS,
    PROVEN_DRIFT_SECONDS,
    BreakType,
    age_bucket,
    is_pending,
)
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import (
    Break,
    LedgerRecord,
    MoneyState,
    Pending,
    RailObject,
    Report,
    break_key,
    money_state,
)
from services.domain.settlement import SettlementStatus
from services.reconcile.claims import claimed_twice

_S = SettlementStatus
_M = MoneyState

# The money states of its one rail object (None: no object) each ledger status agrees with.
# A payout returned after it paid shows `failed`, so `reversed` agrees with failed too; the
# amounts of a transfer's reversal are compared on their own (`amount_reversed`).
AGREES: Mapping[SettlementStatus, frozenset[MoneyState | None]] = {
    _S.ACCEPTED: frozenset({None}),
    _S.DISPATCHING: frozenset({None, _M.IN_FLIGHT}),
    _S.SUBMITTED: frozenset({_M.IN_FLIGHT}),
    _S.NEEDS_REVIEW: frozenset({None, _M.IN_FLIGHT}),
    _S.PAID: frozenset({_M.PAID}),
    _S.FAILED: frozenset({None, _M.FAILED}),
    _S.PARTLY_REVERSED: frozenset({_M.PARTLY_REVERSED}),
    _S.REVERSED: frozenset({_M.REVERSED, _M.PARTLY_REVERSED, _M.FAILED}),
}
# The statuses that say money left: without a rail object they are missing_at_rail.
SENT: frozenset[SettlementStatus] = frozenset(
    {_S.SUBMITTED, _S.PAID, _S.PARTLY_REVERSED, _S.REVERSED}
)
# The money states a rail object shows only once the rail has acted: proof, not a lag.
_FINAL = frozenset({_M.PAID.value, _M.FAILED.value, _M.REVERSED.value, _M.PARTLY_REVERSED.value})
# The findings a settlement can grow out of while the rail catches up.
_MAY_BE_EARLY = frozenset({BreakType.MISSING_AT_RAIL, BreakType.STATUS_DRIFT})
_MISSING = BreakType.MISSING_AT_RAIL
_Item = TypeVar("_Item", LedgerRecord, RailObject)


def compare(
    ledger: Iterable[LedgerRecord],
    rail: Iterable[RailObject],
    now: int,
    grace: int = DEFAULT_GRACE_SECONDS,
    ages: tuple[int, ...] = DEFAULT_RECHECK_AGES,
    booked_through: date | None = None,
    first_claims: Mapping[str, str] | None = None,
) -> Report:
    """The breaks and pending items of `ledger` against `rail` at `now`, in a stable order.

    An object or settlement given twice alike counts once; given twice unalike (two versions
    read at different times) it raises ValueError: the caller must pass one version of each.
    """
    objects = sorted(_one_each(rail, "object_id"), key=lambda o: (o.created, o.object_id))
    by_id = {o.object_id: o for o in objects}
    named: dict[str, list[RailObject]] = {}
    for obj in objects:
        if obj.settlement_id is not None:
            named.setdefault(obj.settlement_id, []).append(obj)
    breaks: list[Break] = []
    pending: list[Pending] = []
    explained: set[str] = set()
    ledger_records = sorted(_one_each(ledger, "settlement_id"), key=lambda r: r.settlement_id)
    for record in ledger_records:
        own = _objects_of(record, by_id, named)
        explained.update(o.object_id for o in own)
        for found in _settlement_breaks(record, own, now):
            early = _early(record, found, now, grace, ages, booked_through)
            if early is None:
                breaks.append(found)
            else:
                pending.append(early)
    unexplained = [o for o in objects if o.object_id not in explained]
    breaks.extend(_unknown(o) for o in unexplained if o.settlement_id is not None)
    breaks.extend(claimed_twice(ledger_records, first_claims))
    return Report(
        tuple(sorted(breaks, key=break_key)),
        tuple(sorted(pending, key=lambda p: (p.settlement_id, p.would_be.value))),
        tuple(o for o in unexplained if o.settlement_id is None),
    )


def _one_each(items: Iterable[_Item], id_field: str) -> list[_Item]:
    """`items` with exact repeats dropped; two unalike items with one id are refused."""
    seen: dict[str, _Item] = {}
    for item in items:
        key = getattr(item, id_field)
        if seen.setdefault(key, item) != item:
            raise ValueError(f"two versions of {id_field} {key}: pass one version of each")
    return list(seen.values())


def _early(
    record: LedgerRecord,
    found: Break,
    now: int,
    grace: int,
    ages: tuple[int, ...],
    booked_through: date | None,
) -> Pending | None:
    """The pending item `found` still is, if the settlement is inside its grace period (or,
    missing from dated records, not due by their last day)."""
    if found.break_type not in _MAY_BE_EARLY or record.sent_at is None:
        return None
    age = now - record.sent_at
    if found.actual in _FINAL and age >= min(grace, PROVEN_DRIFT_SECONDS):
        return None  # the rail proves where the money is: no waiting out the grace
    due = record.due_on
    not_due = due is not None and booked_through is not None and due > booked_through
    if not (is_pending(age, grace) or (not_due and found.break_type is _MISSING)):
        return None
    return Pending(
        record.settlement_id, found.rail_object_id, found.break_type, age, age_bucket(age, ages)
    )


def _objects_of(
    record: LedgerRecord, by_id: Mapping[str, RailObject], named: Mapping[str, list[RailObject]]
) -> list[RailObject]:
    """The settlement's objects, the one its reference names first, then by creation."""
    referenced = by_id.get(record.rail_reference) if record.rail_reference else None
    first = [referenced] if referenced is not None else []
    return first + [o for o in named.get(record.settlement_id, []) if o is not referenced]


def _settlement_breaks(record: LedgerRecord, own: list[RailObject], now: int) -> list[Break]:
    """Every disagreement between one settlement and the rail objects it owns."""
    sid = record.settlement_id
    if not own:
        if record.status not in SENT:
            return []
        return [_break(BreakType.MISSING_AT_RAIL, record, None, "count", 1, 0)]
    if record.sent_at is None or record.status is _S.ACCEPTED:
        return [
            Break(
                BreakType.UNKNOWN_AT_RAIL,
                sid,
                o.object_id,
                "status",
                record.status.value,
                money_state(o).value,
                None,
                o.currency,
            )
            for o in own
        ]
    duplicates = [
        _break(BreakType.DUPLICATE_AT_RAIL, record, o.object_id, "count", 1, len(own))
        for o in own[1:]
    ]
    return duplicates + _field_breaks(record, own[0], now)


def _field_breaks(record: LedgerRecord, obj: RailObject, now: int) -> list[Break]:
    """The fields of the settlement's first object that differ from the ledger's."""
    found: list[Break] = []
    ref = obj.object_id
    if obj.amount != record.amount:
        found.append(_amount(record, ref, "amount", record.amount, obj.amount))
    if obj.currency != record.currency:
        found.append(
            _break(
                BreakType.CURRENCY_MISMATCH, record, ref, "currency", record.currency, obj.currency
            )
        )
    # None: the source does not say where the money went (Stripe's balance report names no
    # payout's bank account), so there is nothing to compare, not a difference.
    if obj.destination is not None and obj.destination != record.destination:
        found.append(
            _break(
                BreakType.DESTINATION_MISMATCH,
                record,
                ref,
                "destination",
                record.destination,
                obj.destination,
            )
        )
    state = money_state(obj)
    if state not in AGREES[record.status]:
        found.append(
            _break(BreakType.STATUS_DRIFT, record, ref, "status", record.status.value, state.value)
        )
    elif obj.kind is PayoutMethod.TRANSFER and obj.amount_reversed != record.amount_reversed:
        found.append(
            _amount(record, ref, "amount_reversed", record.amount_reversed, obj.amount_reversed)
        )
    elif state is _M.IN_FLIGHT and _overdue(obj, now):
        found.append(
            _break(BreakType.OVERDUE, record, ref, "arrival_date", obj.arrival, obj.status)
        )
    return found


def _overdue(obj: RailObject, now: int) -> bool:
    """Whether a payout in transit is past its arrival date and the window it may fail in."""
    return obj.arrival is not None and now >= obj.arrival + PAYOUT_FAILURE_WINDOW_SECONDS


def _break(
    kind: BreakType,
    record: LedgerRecord,
    rail_object_id: str | None,
    field: str,
    expected: str | int | None,
    actual: str | int | None,
) -> Break:
    return Break(
        kind, record.settlement_id, rail_object_id, field, expected, actual, None, record.currency
    )


def _amount(record: LedgerRecord, ref: str, field: str, expected: int, actual: int) -> Break:
    return Break(
        BreakType.AMOUNT_MISMATCH,
        record.settlement_id,
        ref,
        field,
        expected,
        actual,
        actual - expected,
        record.currency,
    )


def _unknown(obj: RailObject) -> Break:
    """An object no settlement explains: the settlement it names is not in the ledger."""
    return Break(
        BreakType.UNKNOWN_AT_RAIL,
        None,
        obj.object_id,
        "settlement_id",
        None,
        obj.settlement_id,
        None,
        obj.currency,
    )
