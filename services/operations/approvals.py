"""Maker-checker: actions that move money or close a break, proposed by one operator and
approved by another (`services/domain/proposal.py` decides who may do what).

`submit` is the one entry point of an action: with two-person mode off it does the action at
once; on, it records a pending proposal. `approve` locks the proposal, does the action through
the action's own `perform` (`services/operations/actions.py`), and
writes the outcome, in one transaction: two approvals of one proposal take turns on its row
lock, and the second finds it decided. An action refused at approval (the rail contradicts
it, its item moved on) leaves the proposal `failed` with the refusal, and the refusal is
raised. The audit row of an approved action names the proposer as `actor` (whose decision and
reason it is) and the approver as `approved_by`; a proposal that was never approved leaves no
audit row, its own record being the proposal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.errors import ApiError
from services.domain.keyset import parse_id
from services.domain.proposal import (
    Move,
    Pending,
    ProposalRefused,
    ProposalStatus,
    after_action,
    decide,
)
from services.operations import proposal_rows as sql
from services.operations.actions import (
    ACTION_REFUSALS,
    ACTIONS,
    ActionName,
    Doing,
    action_named,
    item_of,
)
from services.operations.approval_policy import DEFAULT_MAX_AGE
from services.operations.errors import NotFound, Refused
from services.operations.policy import database_two_person
from services.operations.proposal_rows import proposal_document
from services.operations.rail_lookup import RailLookup

MAX_PAGE = 200
PROPOSAL_PENDING, PROPOSAL_EXPIRED = "proposal_pending", "proposal_expired"
DOWN = "PostgreSQL is unreachable; no proposal was changed"


class Submitted(NamedTuple):
    """What `submit` did with an action."""

    proposed: bool  # True: a proposal awaits a second operator; False: the action was done
    document: dict[str, Any]  # the proposal (proposed), or the action's result


def parse_proposal_id(text: str) -> int:
    """A proposal id from text; NotFound when it is not one."""
    parsed = parse_id(text)
    if parsed is None:
        raise NotFound(f"no proposal {text!r}: ids are positive integers")
    return parsed


async def submit(
    pool: asyncpg.Pool,
    lookup: RailLookup,
    action: ActionName,
    target: str,
    payload: Mapping[str, Any],
    *,
    reason: str | None,
    operator: str,
    now: datetime,
    two_person: bool,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> Submitted:
    """Do `action` on `target` (a settlement, break or inbox event id) as `operator` now, or,
    in two-person mode (the server's `two_person`, or the database's: policy.py), propose it
    for a different operator to approve if it `checked`."""
    async with pool.acquire() as conn:
        checked = ACTIONS[action].checked
        if checked and (two_person or await database_two_person(conn)):
            found = await propose(
                conn,
                action,
                target,
                payload,
                reason=reason,
                operator=operator,
                now=now,
                max_age=max_age,
            )
            return Submitted(True, found)
        act = ACTIONS[action]
        kept, why = act.check(payload, reason)
        done = await act.perform(conn, lookup, Doing(target, kept, why, operator, now))
        return Submitted(False, done)


async def propose(
    conn: asyncpg.Connection,
    action: ActionName,
    target: str,
    payload: Mapping[str, Any],
    *,
    reason: str | None,
    operator: str,
    now: datetime,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> dict[str, Any]:
    """Record `operator`'s proposal of `action` on `target`; Refused (`proposal_pending`) while
    another one for it waits, NotFound, BadRequest or ReasonMissing change nothing."""
    act = ACTIONS[action]
    if not act.checked:
        raise Refused(f"{action} needs no second operator: do it", code="not_proposed")
    kept, why = act.check(payload, reason)
    canonical = await act.target(conn, target)
    with unavailable_when_down("PostgreSQL is unreachable; nothing was proposed"):
        async with conn.transaction():
            # A stale proposal for the target gives way; its decision came too late anyway.
            await conn.execute(sql.EXPIRE_STALE, action, canonical, now, now - max_age)
            try:
                async with conn.transaction():
                    row = await conn.fetchrow(
                        sql.INSERT, action, canonical, json.dumps(kept), why, operator, now
                    )
            except asyncpg.UniqueViolationError:
                waiting = await conn.fetchval(sql.PENDING_OF, action, canonical)
                raise Refused(
                    f"proposal {waiting} for {canonical} awaits a decision already",
                    code=PROPOSAL_PENDING,
                ) from None
    return proposal_document(row, now, max_age)


async def approve(
    conn: asyncpg.Connection,
    lookup: RailLookup,
    proposal: str,
    *,
    operator: str,
    now: datetime,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> dict[str, Any]:
    """Approve another operator's proposal and do its action, audited with both names; the
    proposal after. Refused when it is not `operator`'s to approve, has expired or was decided
    already (nothing changes but an expiry), or when the action is refused (it ends failed)."""
    refusal: ApiError | None = None
    # The action (and its rail lookup) runs under the proposal's row lock: a second approval
    # waits for this one's outcome instead of doing the action again.
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            row, status = await _locked(conn, proposal, Move.APPROVE, operator, now, max_age)
            if status is ProposalStatus.EXPIRED:
                row = await _write(conn, row, status, None, now, None)
            else:
                try:
                    doing = Doing(
                        item_of(row["target"]),
                        json.loads(row["payload"]),
                        row["reason"],
                        row["proposed_by"],
                        now,
                        approver=operator,
                    )
                    action = ACTIONS[action_named(row["action"])]
                    outcome = await action.perform(conn, lookup, doing)
                except ACTION_REFUSALS as e:
                    if e.retriable:
                        raise  # the rail or the database did not answer: still pending
                    refusal, outcome = e, {"code": e.code, "message": e.message}
                status = after_action(refusal is None)
                row = await _write(conn, row, status, operator, now, outcome)
    _raise_if_not_done(row, refusal)
    return proposal_document(row, now, max_age)


async def reject(
    conn: asyncpg.Connection,
    proposal: str,
    *,
    operator: str,
    now: datetime,
    reason: str | None = None,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> dict[str, Any]:
    """Refuse another operator's proposal (why, if said, kept in its outcome); the proposal."""
    return await _close(conn, proposal, Move.REJECT, operator, now, reason, max_age)


async def withdraw(
    conn: asyncpg.Connection,
    proposal: str,
    *,
    operator: str,
    now: datetime,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> dict[str, Any]:
    """Take back one's own pending proposal; the proposal."""
    return await _close(conn, proposal, Move.WITHDRAW, operator, now, None, max_age)


async def list_proposals(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    now: datetime,
    status: ProposalStatus | None = ProposalStatus.PENDING,
    after: int = 0,
    limit: int = MAX_PAGE,
    max_age: timedelta = DEFAULT_MAX_AGE,
) -> list[dict[str, Any]]:
    """Proposals with id above `after`, by id, at most `limit` (capped), in `status` (None:
    any); pending means still waiting, those past their age left out."""
    stale_before = now - max_age if status is ProposalStatus.PENDING else None
    with unavailable_when_down("PostgreSQL is unreachable; no proposal was read"):
        rows = await conn.fetch(sql.LIST, after, min(limit, MAX_PAGE), status, stale_before)
    return [proposal_document(r, now, max_age) for r in rows]


async def _close(
    conn: asyncpg.Connection,
    proposal: str,
    move: Move,
    operator: str,
    now: datetime,
    reason: str | None,
    max_age: timedelta,
) -> dict[str, Any]:
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            row, status = await _locked(conn, proposal, move, operator, now, max_age)
            decided_by = None if status is ProposalStatus.EXPIRED else operator
            outcome = {"reason": reason} if reason and decided_by else None
            row = await _write(conn, row, status, decided_by, now, outcome)
    _raise_if_not_done(row, None)
    return proposal_document(row, now, max_age)


async def _locked(
    conn: asyncpg.Connection,
    proposal: str,
    move: Move,
    operator: str,
    now: datetime,
    max_age: timedelta,
) -> tuple[asyncpg.Record, ProposalStatus]:
    row = await conn.fetchrow(sql.LOCK, parse_proposal_id(proposal))
    if row is None:
        raise NotFound(f"no proposal {proposal}")
    pending = Pending(ProposalStatus(row["status"]), row["proposed_by"], row["proposed_at"])
    try:
        return row, decide(pending, move, operator, now, max_age)
    except ProposalRefused as e:
        raise Refused(f"proposal {row['id']}: {e}", code=e.code) from e


async def _write(
    conn: asyncpg.Connection,
    row: asyncpg.Record,
    status: ProposalStatus,
    decided_by: str | None,
    now: datetime,
    outcome: Mapping[str, Any] | None,
) -> asyncpg.Record:
    written = await conn.fetchrow(
        sql.DECIDE,
        row["id"],
        status,
        decided_by,
        now,
        None if outcome is None else json.dumps(outcome, sort_keys=True, default=str),
    )
    if written is None:  # the row is locked: only a bug or a manual edit gets here
        raise Refused(f"proposal {row['id']} changed under its lock", code="proposal_decided")
    return written


def _raise_if_not_done(row: asyncpg.Record, refusal: ApiError | None) -> None:
    """After the decision is committed: an expiry or a refused action is the caller's error."""
    if row["status"] == ProposalStatus.EXPIRED:
        raise Refused(f"proposal {row['id']} has expired; propose it again", code=PROPOSAL_EXPIRED)
    if refusal is not None:
        raise Refused(
            f"proposal {row['id']} failed: {refusal.message}",
            code=refusal.code,
            field=refusal.field,
        ) from refusal
