"""Bulk operator actions: each item its own audited action (or, in two-person mode, its own
proposal), its own transaction, and a summary of what was done, proposed and refused (with
the refusal's code)."""

from __future__ import annotations

from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, NamedTuple

from services.operations.approvals import Submitted
from services.operations.errors import OperationsError


class ItemOutcome(NamedTuple):
    """What became of one item of a bulk action."""

    id: str
    done: bool
    code: str | None  # the refusal's code; None when done
    message: str | None  # the refusal's message; None when done
    proposal: int | None = None  # in two-person mode, the proposal that awaits approval


async def each(
    ids: AsyncIterable[str], act: Callable[[str], Awaitable[object]]
) -> list[ItemOutcome]:
    """Run `act` on every id in turn; a refusal (any OperationsError) is recorded and the next
    id goes on, anything else (PostgreSQL down) stops the run."""
    outcomes: list[ItemOutcome] = []
    async for item in ids:
        try:
            result = await act(item)
        except OperationsError as e:
            outcomes.append(ItemOutcome(item, False, e.code, e.message))
        else:
            proposal = None
            if isinstance(result, Submitted) and result.proposed:
                proposal = int(result.document["id"])
            outcomes.append(ItemOutcome(item, True, None, None, proposal))
    return outcomes


def summary(outcomes: list[ItemOutcome]) -> dict[str, Any]:
    """`{"done", "proposed", "refused", "items"}` of a bulk action, items in the order they
    ran; `proposed` counts those awaiting a second operator (two-person mode)."""
    return {
        "done": sum(1 for o in outcomes if o.done and o.proposal is None),
        "proposed": sum(1 for o in outcomes if o.proposal is not None),
        "refused": sum(1 for o in outcomes if not o.done),
        "items": [o._asdict() for o in outcomes],
    }


async def lines_of(text: str) -> AsyncIterable[str]:
    """The non-blank lines of a file of ids, stripped, one id per line."""
    for line in text.splitlines():
        if line.strip():
            yield line.strip()
