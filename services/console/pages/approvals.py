"""Maker-checker on the console: proposals, a keyset page at a time, and their decisions.

    GET  /approvals?status=&after=   pending proposals (or those in `status`; "" = any)
    POST /approvals/approve          form: ids, csrf        a second operator approves
    POST /approvals/reject           form: ids, reason, csrf
    POST /approvals/withdraw         form: withdraw (a proposal id), csrf   its proposer only

A POST decides each selected proposal through `services.console.actions.decide` and shows
the page again with each one's outcome (done, or refused with its code).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.adapters.postgres.store_errors import unavailable_when_down
from services.console.actions import decide
from services.console.auth import Caller
from services.console.pages.queues import PAGE, WEBHOOK_QUEUES
from services.console.web import (
    Console,
    Handler,
    guarded,
    posted,
    render,
    text,
    texts,
)
from services.domain.keyset import next_after
from services.domain.proposal import Move, ProposalStatus
from services.operations.bulk import ItemOutcome
from services.operations.query import choice, whole_number

INBOX_EVENTS = "SELECT id, status, settlement_id FROM inbox_events WHERE id = ANY($1::bigint[])"


def age_text(age: timedelta) -> str:
    """How long a proposal has waited, to the minute (seconds under a minute)."""
    seconds = max(int(age.total_seconds()), 0)
    if seconds < 60:
        return f"{seconds}s"
    hours, minutes = divmod(seconds // 60, 60)
    return f"{hours}h {minutes}m" if hours else f"{minutes}m"


def target_link(target: str, event: Mapping[str, Any] | None) -> str | None:
    """Where a proposal's item is shown: its settlement's story, its break first in the
    breaks of any status, or its webhook's queue (else its settlement); None if nowhere."""
    kind, _, item = target.partition(":")
    if kind == "settlement":
        return f"/settlements/{item}"
    if kind == "break":
        return f"/breaks?status=&after={int(item) - 1}"
    if event is None:
        return None
    if event["status"] in WEBHOOK_QUEUES:
        return f"/webhooks?status={event['status']}&after={int(item) - 1}"
    return f"/settlements/{event['settlement_id']}" if event["settlement_id"] else None


async def _events(pool: asyncpg.Pool, proposals: list[dict[str, Any]]) -> dict[str, Any]:
    ids = [int(p["target"][6:]) for p in proposals if p["target"].startswith("inbox:")]
    if not ids:
        return {}
    with unavailable_when_down("PostgreSQL is unreachable; no webhook was read"):
        rows = await pool.fetch(INBOX_EVENTS, ids)
    return {f"inbox:{r['id']}": r for r in rows}


async def approvals_page(
    console: Console, request: Request, caller: Caller, outcomes: list[ItemOutcome] | None
) -> Response:
    """Proposals pending (unless told another status), with a decision's outcomes if given."""
    q = request.query_params
    status = choice(list(ProposalStatus), q.get("status", "pending") or None, "status")
    now = console.clock()
    found = await console.desk.proposals(
        status=status, after=whole_number(q.get("after") or None, "after"), limit=PAGE
    )
    events = await _events(console.pool, found)
    for p in found:
        p["link"] = target_link(p["target"], events.get(p["target"]))
        p["age"] = age_text(now - datetime.fromisoformat(p["proposed_at"]))
    shown = status.value if status else ""
    return render(
        console,
        "approvals.html",
        caller,
        items=found,
        outcomes=outcomes,
        shown_status=shown,
        statuses=list(ProposalStatus),
        two_person=console.policy.two_person,
        next_after=next_after([p["id"] for p in found], PAGE),
    )


def routes(console: Console) -> list[Route]:
    """The approvals page and its three decisions."""

    async def listing(request: Request, caller: Caller) -> Response:
        return await approvals_page(console, request, caller, None)

    def decision(move: Move) -> Handler:
        async def post(request: Request, caller: Caller) -> Response:
            form = await posted(console, request, caller)
            chosen = texts(form, "withdraw" if move is Move.WITHDRAW else "ids")
            outcomes = await decide(
                console.desk,
                move,
                chosen,
                text(form, "reason").strip() or None,
                caller.operator,
            )
            return await approvals_page(console, request, caller, outcomes)

        return post

    return [
        Route("/approvals", guarded(console, listing), methods=["GET"]),
        *(
            Route(f"/approvals/{move.value}", guarded(console, decision(move)), methods=["POST"])
            for move in Move
        ),
    ]
