"""Two-person mode through every door an operator uses: the reconciler's operator routes (its
inbox replay among them) and the `settle review|approvals` commands each propose (202 or exit 0
with the proposal) and a different operator's approval does the action, audited with both
names."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.apps.reconciler import operator_routes
from services.operations.approval_policy import Policy
from services.operations.http import routes
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from services.platform.clock import utc_now
from tests.conftest import unique
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    OPERATORS,
    operator_app,
    plant_breaks,
    rail,
    referred,
    settle_as_operator,
    snapshot,
    world,
)

pytestmark = pytest.mark.integration
__all__ = ["rail", "template", "world"]
ALICE, BOB = "alice-token", "bob-token"
TWO_PERSON = Policy(True, timedelta(days=1))
DEAD_EVENT = """
INSERT INTO inbox_events (rail, rail_event_id, payload, status, reason, received_at,
                          received_month, attempts)
VALUES ('stripe', $1, '\\x7b7d', 'dead', 'no settlement names tr_x', $2,
        date_trunc('month', $2 AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', 3)
RETURNING id
"""


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_of(world: World, rail: StripeLookup) -> httpx.AsyncClient:
    operators = BearerAuth({ALICE: "alice", BOB: "bob"})
    app = operator_app(routes(world.pool, rail, operators, policy=TWO_PERSON))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://ops")


async def audit_of(world: World, target: str) -> list[tuple[str, str | None]]:
    rows = await world.pool.fetch(
        "SELECT actor, approved_by FROM operator_actions WHERE target = $1 ORDER BY id", target
    )
    return [tuple(r) for r in rows]


async def test_http_resolutions_are_proposed_and_a_second_operator_decides_them(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    (break_id,) = await plant_breaks(world.pool, 1)
    async with client_of(world, rail) as client:
        review = await client.post(
            f"/v1/review/{sid}/resolve",
            headers=as_(ALICE),
            json={"as": "failed", "reason": "nothing sent"},
        )
        closing = await client.post(
            f"/v1/breaks/{break_id}/resolve", headers=as_(ALICE), json={"reason": "written off"}
        )
        assert (review.status_code, review.json()["status"]) == (202, "pending")
        assert (await snapshot(world, sid))["status"] == "needs_review"
        listed = (await client.get("/v1/approvals", headers=as_(BOB))).json()["data"]
        assert [p["target"] for p in listed] == [f"settlement:{sid}", f"break:{break_id}"]
        pid, bid = review.json()["id"], closing.json()["id"]
        own = await client.post(f"/v1/approvals/{pid}/approve", headers=as_(ALICE))
        assert (own.status_code, own.json()["error"]["code"]) == (409, "same_operator")
        done = await client.post(f"/v1/approvals/{pid}/approve", headers=as_(BOB))
        refused = await client.post(
            f"/v1/approvals/{bid}/reject", headers=as_(BOB), json={"reason": "not written off yet"}
        )
        missing = await client.post("/v1/approvals/999999/approve", headers=as_(BOB))
        decided = await client.get("/v1/approvals?status=any", headers=as_(BOB))
    assert (done.status_code, done.json()["status"]) == (200, "approved")
    assert (refused.status_code, refused.json()["status"]) == (200, "rejected")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    assert [p["status"] for p in decided.json()["data"]] == ["approved", "rejected"]
    assert (await snapshot(world, sid))["status"] == "failed"
    assert await audit_of(world, f"settlement:{sid}") == [("alice", "bob")]
    assert await audit_of(world, f"break:{break_id}") == []


async def test_an_inbox_replay_in_two_person_mode_is_proposed_not_done(
    world: World, rail: StripeLookup
) -> None:
    event = unique("evt_")
    row_id = await world.pool.fetchval(DEAD_EVENT, event, datetime.now(UTC))
    operators = BearerAuth({ALICE: "alice"})
    app = operator_app(operator_routes(world.pool, rail, operators, utc_now, TWO_PERSON))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ops") as admin:
        proposed = await admin.post(f"/v1/inbox/{event}/replay", headers=as_(ALICE))
        again = await admin.post(f"/v1/inbox/{row_id}/replay", headers=as_(ALICE))
    assert proposed.status_code == 202
    assert (proposed.json()["target"], proposed.json()["status"]) == (f"inbox:{row_id}", "pending")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "proposal_pending")
    status = await world.pool.fetchval("SELECT status FROM inbox_events WHERE id = $1", row_id)
    assert status == "dead" and await audit_of(world, str(row_id)) == []


async def settle(world: World, *args: str, token: str | None = None) -> tuple[int, Any]:
    """`settle *args --json` against a two-person operator API, holding the token of the
    operator `--operator` names (or `token`)."""
    status, out = await settle_as_operator(world, *args, "--json", two_person=True, token=token)
    return status, json.loads(out)


async def test_settle_review_proposes_and_settle_approvals_approves(world: World) -> None:
    sid = await referred(world)
    given = ("--as", "failed", "--reason", "nothing sent", "--operator", "alice")
    status, proposal = await settle(world, "review", "resolve", sid, *given)
    assert (status, proposal["status"]) == (0, "pending")
    assert (await snapshot(world, sid))["status"] == "needs_review"
    pid = str(proposal["id"])
    status, listed = await settle(world, "approvals", "list")
    assert status == 0 and [p["id"] for p in listed["data"]] == [proposal["id"]]
    status, own = await settle(world, "approvals", "approve", pid, "--operator", "alice")
    assert (status, own["error"]["code"]) == (1, "same_operator")
    # A typed name is not a second operator: the server takes the operator from the token.
    status, posing = await settle(
        world, "approvals", "approve", pid, "--operator", "bob", token=OPERATORS["alice"]
    )
    assert (status, posing["error"]["code"]) == (1, "operator_mismatch")
    for token, refused in (("", (2, "config")), ("not-a-token", (1, "unauthorized"))):
        status, unknown = await settle(
            world, "approvals", "approve", pid, "--operator", "bob", token=token
        )
        assert (status, unknown["error"]["code"]) == refused
    assert (await snapshot(world, sid))["status"] == "needs_review"
    status, done = await settle(world, "approvals", "approve", pid, "--operator", "bob")
    assert (status, done["status"], done["decided_by"]) == (0, "approved", "bob")
    assert (await snapshot(world, sid))["status"] == "failed"
    assert await audit_of(world, f"settlement:{sid}") == [("alice", "bob")]


async def test_settle_breaks_bulk_proposes_each_break_and_counts_the_proposals(
    world: World, tmp_path: Path
) -> None:
    ids = await plant_breaks(world.pool, 2)
    listed = tmp_path / "breaks.txt"
    listed.write_text(f"{ids[0]}\n{ids[1]}\n999999999\n")
    status, summary = await settle(
        world,
        "breaks",
        "resolve",
        "--from-file",
        str(listed),
        "--reason",
        "written off",
        "--operator",
        "alice",
    )
    assert status == 1  # one id is no break
    assert (summary["done"], summary["proposed"], summary["refused"]) == (0, 2, 1)
    proposals = [i["proposal"] for i in summary["items"][:2]]
    targets = await world.pool.fetch(
        "SELECT target, status FROM operator_proposals WHERE id = ANY($1::bigint[]) ORDER BY id",
        proposals,
    )
    assert [tuple(t) for t in targets] == [(f"break:{i}", "pending") for i in ids]
    still = await world.pool.fetch(
        "SELECT status FROM reconciliation_breaks WHERE id = ANY($1::bigint[])", ids
    )
    assert [r["status"] for r in still] == ["open", "open"]
