"""The pure rules of break work (services/domain/break_work.py) as operator errors: a break's
facts read from its row, and a rule's refusal answered as a 409 with the rule's code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from services.domain.break_work import BreakAction, BreakFacts, BreakWorkRefused, check_applies
from services.operations.errors import Refused
from services.reconcile.store import StoredBreak


def facts_of(item: StoredBreak) -> BreakFacts:
    """What decides which actions `item` takes."""
    return BreakFacts(
        item.id,
        item.break_type,
        item.status,
        item.field,
        item.settlement_id,
        item.rail_object_id,
    )


@contextmanager
def obeying() -> Iterator[None]:
    """A break work rule's refusal raised as Refused, with its code and field."""
    try:
        yield
    except BreakWorkRefused as e:
        raise Refused(str(e), code=e.code, field=e.field) from e


def applicable(action: BreakAction, item: StoredBreak) -> str:
    """The canonical target of `action` on `item`; Refused when it does not apply."""
    with obeying():
        check_applies(action, facts_of(item))
    return f"break:{item.id}"
