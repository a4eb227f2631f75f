"""Whether the rail agrees with an operator's resolution of a settlement under review: pure.

    resolution  the rail, looked up at that moment, must show
    paid        exactly one object for the settlement, of its amount, currency and
                destination, its money paid (not in flight, failed or reversed)
    failed      no object, and no attempt of the dispatcher in flight
    retry       no object, and no attempt in flight: the instruction is re-armed under the
                same rail key, so a late object from an earlier attempt is the same object

An operator correcting a settlement from a reconciliation break (services/operations/
corrections.py) asks the rail the same way, with no attempt of the dispatcher in flight:

    correction  the rail must show
    reversed    no object, or only objects whose money came back (reversed, or failed)
    failed      no object, or only failed ones
    paid        what a paid resolution needs
    match       the break's object, of the settlement's amount and currency, the settlement
                having no rail reference or that one

Anything else is refused with the rule's code and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from services.domain.instruction import (
    IN_FLIGHT,
    SETTLEMENT_RESOLVED,
    IllegalResolution,
    InstructionStatus,
    Resolution,
    resolved_status,
)
from services.domain.reconciliation import MoneyState, RailObject, money_state
from services.domain.settlement import SettlementStatus
from services.operations.errors import Refused

RAIL_DISAGREES = "rail_disagrees"
NOT_IN_REVIEW = "not_in_review"
ATTEMPT_IN_FLIGHT = "attempt_in_flight"
INSTRUCTION_STATUS = "instruction_status"
REFERENCE_TAKEN = "reference_taken"
# What the rail may show of a settlement corrected to each status: its money back, or none.
CAME_BACK: dict[SettlementStatus, frozenset[MoneyState]] = {
    SettlementStatus.REVERSED: frozenset({MoneyState.REVERSED, MoneyState.FAILED}),
    SettlementStatus.FAILED: frozenset({MoneyState.FAILED}),
}


class UnderReview(NamedTuple):
    """A settlement and its rail instruction as an operator's resolution finds them."""

    settlement_id: str
    status: SettlementStatus
    amount: int  # minor units the instruction asks the rail to move
    currency: str  # ISO 4217, upper case
    destination: str  # the account the instruction pays
    instruction: InstructionStatus


class Decision(NamedTuple):
    """What an accepted resolution writes."""

    instruction: InstructionStatus  # the instruction's status after it
    settlement: SettlementStatus | None  # the settlement's; None keeps it in review
    rail_reference: str | None  # the one rail object a paid resolution adopts


def decide(item: UnderReview, resolution: Resolution, objects: Sequence[RailObject]) -> Decision:
    """The writes of resolving `item` as `resolution` given what the rail shows; Refused with
    the code of the first rule that does not hold."""
    instruction = admissible(item, resolution)
    reference = None
    if resolution is Resolution.PAID:
        reference = the_one_paid(item, objects).object_id
    elif objects:
        shown = ", ".join(sorted(o.object_id for o in objects))
        raise Refused(
            f"settlement {item.settlement_id}: the rail shows {shown}; {resolution} needs none",
            code=RAIL_DISAGREES,
        )
    return Decision(instruction, SETTLEMENT_RESOLVED[resolution], reference)


def admissible(item: UnderReview, resolution: Resolution) -> InstructionStatus:
    """The instruction's status after `resolution` if the rows allow it, whatever the rail
    says; Refused (not in review, attempt in flight, instruction status) otherwise."""
    if item.status is not SettlementStatus.NEEDS_REVIEW:
        raise Refused(f"settlement {item.settlement_id} is {item.status}", code=NOT_IN_REVIEW)
    _not_in_flight(item)
    try:
        return resolved_status(item.instruction, resolution)
    except IllegalResolution as e:
        raise Refused(str(e), code=INSTRUCTION_STATUS) from e


def correct_verdict(
    item: UnderReview, target: SettlementStatus, objects: Sequence[RailObject]
) -> str | None:
    """The rail reference correcting `item` to `target` adopts (paid only), if the rail, as
    `objects` show it, agrees; Refused (attempt in flight, rail disagrees) otherwise."""
    _not_in_flight(item)
    if target is SettlementStatus.PAID:
        return the_one_paid(item, objects).object_id
    off = sorted(o.object_id for o in objects if money_state(o) not in CAME_BACK[target])
    if off:
        raise Refused(
            f"settlement {item.settlement_id}: the rail shows {', '.join(off)} with money "
            f"out; {target} needs none",
            code=RAIL_DISAGREES,
        )
    return None


def match_verdict(
    item: UnderReview, reference: str | None, object_id: str, objects: Sequence[RailObject]
) -> RailObject:
    """The rail object `object_id` matched to `item` (whose rail reference is `reference`), if
    the rail shows it with the settlement's amount and currency; Refused otherwise."""
    reference_free(item.settlement_id, reference, object_id)
    shown = [o for o in objects if o.object_id == object_id]
    if not shown:
        raise Refused(f"the rail does not show {object_id}", code=RAIL_DISAGREES)
    for field, expected, actual in (
        ("amount", item.amount, shown[0].amount),
        ("currency", item.currency, shown[0].currency),
    ):
        if expected != actual:
            raise Refused(
                f"rail object {object_id} has {field} {actual!r}, settlement "
                f"{item.settlement_id} {expected!r}",
                code=RAIL_DISAGREES,
                field=field,
            )
    return shown[0]


def reference_free(settlement_id: str, reference: str | None, object_id: str) -> None:
    """Refuse (`reference_taken`) a settlement whose rail reference is another object's."""
    if reference not in (None, object_id):
        raise Refused(
            f"settlement {settlement_id} has rail reference {reference} already",
            code=REFERENCE_TAKEN,
            field="settlement_id",
        )


def _not_in_flight(item: UnderReview) -> None:
    if item.instruction in IN_FLIGHT:
        raise Refused(
            f"settlement {item.settlement_id}: the dispatcher has an attempt in flight "
            f"(instruction {item.instruction}); wait for its answer",
            code=ATTEMPT_IN_FLIGHT,
        )


def the_one_paid(item: UnderReview, objects: Sequence[RailObject]) -> RailObject:
    """The one object the rail paid `item` with: of its amount, currency and destination;
    Refused (`rail_disagrees`, naming the field) otherwise."""
    if len(objects) != 1:
        raise Refused(
            f"settlement {item.settlement_id}: the rail shows {len(objects)} objects; "
            "paid needs exactly one",
            code=RAIL_DISAGREES,
        )
    (obj,) = objects
    for field, expected, actual in (
        ("amount", item.amount, obj.amount),
        ("currency", item.currency, obj.currency),
        ("destination", item.destination, obj.destination),
        ("state", MoneyState.PAID.value, money_state(obj).value),
    ):
        if expected != actual:
            raise Refused(
                f"settlement {item.settlement_id}: rail object {obj.object_id} has {field} "
                f"{actual!r}, the settlement {expected!r}",
                code=RAIL_DISAGREES,
                field=field,
            )
    return obj
