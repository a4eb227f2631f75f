"""Maker-checker on the real PostgreSQL against the served rail simulator: a proposal waits for
a different operator; approved, its action is done once, through the function the CLI calls,
audited with both names; refused by the rail at approval, it fails and changes nothing;
rejected, withdrawn or expired, nothing happens; two approvals at once apply it once; a rail
that does not answer leaves it pending."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from services.domain.errors import ApiError
from services.domain.proposal import ProposedAction as A
from services.operations.approvals import approve, list_proposals, propose, reject, submit
from services.operations.approvals import withdraw as withdraw_proposal
from services.operations.errors import RailUnavailable, Refused
from services.operations.rail_lookup import StripeLookup
from tests.conftest import unique
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    made_at_rail,
    plant_breaks,
    rail,
    referred,
    snapshot,
    world,
)
from tools.infra.procs import free_ports

pytestmark = [pytest.mark.integration, pytest.mark.money]
__all__ = ["rail", "template", "world"]
REASON = "nothing at the rail after 7 days"
DEAD_EVENT = """
INSERT INTO inbox_events (rail, rail_event_id, payload, status, reason, received_at,
                          received_month, attempts)
VALUES ('stripe', $1, '\\x7b7d', 'dead', 'no settlement names tr_x', $2,
        date_trunc('month', $2 AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', 3)
RETURNING id
"""


def now() -> datetime:
    return datetime.now(UTC)


async def proposed_failure(world: World, sid: str, by: str = "alice") -> dict[str, Any]:
    async with world.pool.acquire() as conn:
        return await propose(
            conn, A.REVIEW_RESOLVE, sid, {"as": "failed"}, reason=REASON, operator=by, now=now()
        )


async def approved(world: World, rail: StripeLookup, pid: int, by: str) -> dict[str, Any]:
    async with world.pool.acquire() as conn:
        return await approve(conn, rail, str(pid), operator=by, now=now())


async def refusal(work: Any) -> Refused:
    with pytest.raises(Refused) as refused:
        await work
    return refused.value


async def stored(world: World, pid: int) -> asyncpg.Record:
    row = await world.pool.fetchrow("SELECT * FROM operator_proposals WHERE id = $1", pid)
    assert row is not None
    return row


async def audit_of(world: World, target: str) -> list[tuple[str, str, str | None]]:
    rows = await world.pool.fetch(
        "SELECT actor, action, approved_by FROM operator_actions WHERE target = $1 ORDER BY id",
        target,
    )
    return [tuple(r) for r in rows]


async def test_the_proposer_cannot_approve_or_reject_their_own_proposal(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    before = await snapshot(world, sid)
    proposal = await proposed_failure(world, sid)
    assert (proposal["status"], proposal["target"]) == ("pending", f"settlement:{sid}")
    assert (await refusal(approved(world, rail, proposal["id"], "alice"))).code == "same_operator"
    async with world.pool.acquire() as conn:
        own = reject(conn, str(proposal["id"]), operator="alice", now=now())
        assert (await refusal(own)).code == "same_operator"
        # One pending proposal per action and item, however the item's id was written.
        again = propose(
            conn,
            A.REVIEW_RESOLVE,
            sid.upper(),
            {"as": "retry"},
            reason=REASON,
            operator="carol",
            now=now(),
        )
        assert (await refusal(again)).code == "proposal_pending"
    assert (await stored(world, proposal["id"]))["status"] == "pending"
    assert await snapshot(world, sid) == before


async def test_a_different_operator_approves_and_the_action_happens_once_with_both_names(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    proposal = await proposed_failure(world, sid)
    assert [p["id"] for p in await list_proposals(world.pool, now=now())] == [proposal["id"]]
    done = await approved(world, rail, proposal["id"], "bob")
    assert (done["status"], done["decided_by"], done["outcome"]["settlement"]) == (
        "approved",
        "bob",
        "failed",
    )
    after = await snapshot(world, sid)
    assert (after["status"], after["instruction"], after["net"]) == ("failed", "failed", {})
    assert await audit_of(world, f"settlement:{sid}") == [("alice", "review.resolve", "bob")]
    assert done["outcome"]["action_id"] == await world.pool.fetchval(
        "SELECT id FROM operator_actions WHERE target = $1", f"settlement:{sid}"
    )
    # Approving again does nothing more.
    assert (await refusal(approved(world, rail, proposal["id"], "carol"))).code == (
        "proposal_decided"
    )
    assert len((await snapshot(world, sid))["actions"]) == 1
    assert await list_proposals(world.pool, now=now()) == []


async def test_a_break_and_a_replay_approved_are_audited_with_both_names(
    world: World, rail: StripeLookup
) -> None:
    (break_id,) = await plant_breaks(world.pool, 1)
    event = unique("evt_")
    row_id = await world.pool.fetchval(DEAD_EVENT, event, now())
    async with world.pool.acquire() as conn:
        closing = await propose(
            conn,
            A.BREAK_RESOLVE,
            str(break_id),
            {},
            reason="paid by hand",
            operator="alice",
            now=now(),
        )
        replaying = await propose(
            conn, A.INBOX_REPLAY, event, {}, reason=None, operator="carol", now=now()
        )
    assert replaying["target"] == f"inbox:{row_id}"
    await approved(world, rail, closing["id"], "bob")
    await approved(world, rail, replaying["id"], "bob")
    status = await world.pool.fetchrow(
        "SELECT status, resolved_by FROM reconciliation_breaks WHERE id = $1", break_id
    )
    assert tuple(status) == ("resolved", "alice")
    assert await audit_of(world, f"break:{break_id}") == [("alice", "break.resolve", "bob")]
    inbox = await world.pool.fetchval("SELECT status FROM inbox_events WHERE id = $1", row_id)
    assert inbox == "received"
    assert await audit_of(world, str(row_id)) == [("carol", "inbox.replay", "bob")]


async def test_rejected_or_withdrawn_nothing_happens(world: World, rail: StripeLookup) -> None:
    sid, other = await referred(world), await referred(world)
    before = await snapshot(world, sid)
    rejected, withdrawn = await proposed_failure(world, sid), await proposed_failure(world, other)
    async with world.pool.acquire() as conn:
        done = await reject(
            conn,
            str(rejected["id"]),
            operator="bob",
            now=now(),
            reason="the payee called: it arrived",
        )
        assert (done["status"], done["outcome"]) == (
            "rejected",
            {"reason": "the payee called: it arrived"},
        )
        not_theirs = withdraw_proposal(conn, str(withdrawn["id"]), operator="bob", now=now())
        assert (await refusal(not_theirs)).code == "not_proposer"
        taken_back = await withdraw_proposal(
            conn, str(withdrawn["id"]), operator="alice", now=now()
        )
    assert (taken_back["status"], taken_back["decided_by"]) == ("withdrawn", "alice")
    assert (await refusal(approved(world, rail, rejected["id"], "carol"))).code == (
        "proposal_decided"
    )
    assert await snapshot(world, sid) == before
    assert (await snapshot(world, other))["status"] == "needs_review"


async def test_a_proposal_the_rail_contradicts_at_approval_fails_and_changes_nothing(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    proposal = await proposed_failure(world, sid)
    # Between the proposal and its approval the rail shows the transfer: failed is wrong now.
    transfer = await made_at_rail(world, sid)
    before = await snapshot(world, sid)
    refused = await refusal(approved(world, rail, proposal["id"], "bob"))
    assert refused.code == "rail_disagrees" and transfer in refused.message
    row = await stored(world, proposal["id"])
    assert (row["status"], row["decided_by"]) == ("failed", "bob")
    assert json.loads(row["outcome"])["code"] == "rail_disagrees"
    assert await snapshot(world, sid) == before and before["actions"] == []


async def test_two_approvals_at_once_apply_the_proposal_once(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    proposal = await proposed_failure(world, sid)
    results = await asyncio.gather(
        approved(world, rail, proposal["id"], "bob"),
        approved(world, rail, proposal["id"], "carol"),
        return_exceptions=True,
    )
    done = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, Refused)]
    assert len(done) == 1 and [r.code for r in refused] == ["proposal_decided"]
    after = await snapshot(world, sid)
    assert after["status"] == "failed" and after["net"] == {}
    approver = done[0]["decided_by"]
    assert await audit_of(world, f"settlement:{sid}") == [("alice", "review.resolve", approver)]


async def test_a_proposal_past_its_age_expires_and_gives_way_to_a_new_one(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    before = await snapshot(world, sid)
    age = timedelta(hours=1)
    proposed_at = now() - age
    async with world.pool.acquire() as conn:
        old = await propose(
            conn,
            A.REVIEW_RESOLVE,
            sid,
            {"as": "failed"},
            reason=REASON,
            operator="alice",
            now=proposed_at,
            max_age=age,
        )
        assert await list_proposals(conn, now=now(), max_age=age) == []
        late = approve(conn, rail, str(old["id"]), operator="bob", now=now(), max_age=age)
        assert (await refusal(late)).code == "proposal_expired"
    row = await stored(world, old["id"])
    assert (row["status"], row["decided_by"]) == ("expired", None)
    assert await snapshot(world, sid) == before
    fresh = await proposed_failure(world, sid)
    assert fresh["status"] == "pending" and fresh["id"] != old["id"]


async def test_with_two_person_mode_off_submit_acts_at_once_in_one_name(
    world: World, rail: StripeLookup
) -> None:
    sid, other = await referred(world), await referred(world)
    done = await submit(
        world.pool,
        rail,
        A.REVIEW_RESOLVE,
        sid,
        {"as": "failed"},
        reason=REASON,
        operator="alice",
        now=now(),
        two_person=False,
    )
    assert not done.proposed and done.document["settlement"] == "failed"
    assert await audit_of(world, f"settlement:{sid}") == [("alice", "review.resolve", None)]
    waiting = await submit(
        world.pool,
        rail,
        A.REVIEW_RESOLVE,
        other,
        {"as": "failed"},
        reason=REASON,
        operator="alice",
        now=now(),
        two_person=True,
    )
    assert waiting.proposed and waiting.document["status"] == "pending"
    assert (await snapshot(world, other))["status"] == "needs_review"


async def test_the_table_holds_the_rules_against_any_writer(world: World) -> None:
    sid = await referred(world)
    proposal = await proposed_failure(world, sid)
    pid = proposal["id"]
    decided = "UPDATE operator_proposals SET status = $2, decided_by = $3, decided_at = now(), "
    with pytest.raises(asyncpg.CheckViolationError):
        await world.pool.execute(decided + "outcome = '{}' WHERE id = $1", pid, "approved", "alice")
    await world.pool.execute(decided + "outcome = NULL WHERE id = $1", pid, "rejected", "bob")
    with pytest.raises(asyncpg.RestrictViolationError, match="final"):
        await world.pool.execute(decided + "outcome = NULL WHERE id = $1", pid, "pending", None)
    with pytest.raises(asyncpg.RestrictViolationError, match="keeps every proposal"):
        await world.pool.execute("DELETE FROM operator_proposals WHERE id = $1", pid)
    with pytest.raises(asyncpg.CheckViolationError):
        await world.pool.execute(
            "INSERT INTO operator_actions (actor, action, target, approved_by) "
            "VALUES ('alice', 'review.resolve', $1, 'alice')",
            f"settlement:{sid}",
        )


async def test_an_approval_the_rail_cannot_answer_leaves_the_proposal_pending(
    world: World,
) -> None:
    sid = await referred(world)
    before = await snapshot(world, sid)
    proposal = await proposed_failure(world, sid)
    closed = f"http://127.0.0.1:{free_ports()}"  # nothing listens there
    silent = StripeLookup("sk_test_x", api_base=closed)
    try:
        with pytest.raises(RailUnavailable):
            await approved(world, silent, proposal["id"], "bob")
    finally:
        await silent.aclose()
    row = await stored(world, proposal["id"])
    assert (row["status"], row["decided_by"]) == ("pending", None)
    assert await snapshot(world, sid) == before


async def test_a_proposal_its_item_already_refuses_is_refused_at_once(world: World) -> None:
    paid = await world.accept()
    (closed,) = await plant_breaks(world.pool, 1, status="resolved")
    event = unique("evt_")
    row_id = await world.pool.fetchval(DEAD_EVENT, event, now())
    await world.pool.execute("UPDATE inbox_events SET status = 'received' WHERE id = $1", row_id)
    async with world.pool.acquire() as conn:
        for action, item, code in (
            (A.REVIEW_RESOLVE, paid, "not_in_review"),
            (A.BREAK_RESOLVE, str(closed), "break_closed"),
            (A.INBOX_REPLAY, event, "not_replayable"),
        ):
            with pytest.raises(ApiError) as refused:
                await propose(
                    conn, action, item, {"as": "failed"}, reason=REASON, operator="alice", now=now()
                )
            assert refused.value.code == code
    assert await world.pool.fetchval("SELECT count(*) FROM operator_proposals") == 0
