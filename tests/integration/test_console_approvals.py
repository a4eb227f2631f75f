"""Maker-checker on the console: with two-person mode on, an operator's action is a proposal
that changes nothing; the proposer can neither approve nor reject it, only withdraw it; a
second operator approves it from /approvals and the action is done once, checked against the
rail then, and audited under both names."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from services.console.web import Console
from services.operations.approval_policy import Policy
from services.operations.rail_lookup import StripeLookup
from tests.integration.check_support import World, template
from tests.integration.console_support import (
    ERIN,
    FRANK,
    Clock,
    client_of,
    clock,
    console_of,
    csrf_of,
    error_code,
    outcomes,
    plant_inbox,
    row_ids,
    sign_in,
)
from tests.integration.operator_support import (
    made_at_rail,
    plant_breaks,
    rail,
    referred,
    snapshot,
    world,
)

pytestmark = pytest.mark.integration
__all__ = ["clock", "rail", "template", "world"]
TWO_PERSON = Policy(True, timedelta(hours=1))


@pytest.fixture
def console(world: World, rail: StripeLookup, clock: Clock) -> Console:
    return console_of(world, rail, clock, policy=TWO_PERSON)


async def _signed_in(console: Console, token: str) -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(console) as client:
        assert (await sign_in(client, token)).status_code == 303
        yield client


@pytest.fixture
async def erin(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _signed_in(console, ERIN):
        yield client


@pytest.fixture
async def frank(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    async for client in _signed_in(console, FRANK):
        yield client


def proposal_of(page: httpx.Response, item: str) -> str:
    """The id of the proposal a page says `item`'s action became."""
    found = re.search(
        rf'data-id="{re.escape(item)}" data-outcome="proposed"[^>]*'
        r'data-proposal="(\d+)"',
        page.text,
    )
    assert found is not None, page.text
    return found.group(1)


async def decide(
    client: httpx.AsyncClient, move: str, proposal: str, reason: str = ""
) -> httpx.Response:
    """`move` (approve, reject, withdraw) on `proposal` as the client's operator, by the form."""
    field = "withdraw" if move == "withdraw" else "ids"
    data = {field: proposal, "reason": reason, "csrf": await csrf_of(client, "/approvals")}
    return await client.post(f"/approvals/{move}", data=data)


async def audit_of(world: World, target: str) -> list[tuple[str, str | None]]:
    rows = await world.pool.fetch(
        "SELECT actor, approved_by FROM operator_actions WHERE target = $1", target
    )
    return [(r["actor"], r["approved_by"]) for r in rows]


async def test_a_resolution_waits_for_a_second_operator_and_is_done_once(
    world: World, erin: httpx.AsyncClient, frank: httpx.AsyncClient
) -> None:
    sid = await referred(world)
    before = await snapshot(world, sid)
    asked = await erin.post(
        "/review/resolve",
        data={
            "ids": sid,
            "as": "failed",
            "reason": "nothing left the bank",
            "csrf": await csrf_of(erin, "/review"),
        },
    )
    assert outcomes(asked) == {sid: ("proposed", "")}
    assert "proposed, awaiting a second operator" in asked.text
    proposal = proposal_of(asked, sid)
    assert await snapshot(world, sid) == before
    assert await audit_of(world, f"settlement:{sid}") == []

    own = await erin.get("/approvals")
    assert row_ids(own, "proposal") == [proposal]
    assert f'id="withdraw-{proposal}"' in own.text and f'id="select-{proposal}"' not in own.text
    refused = await decide(erin, "approve", proposal)
    assert outcomes(refused) == {proposal: ("refused", "same_operator")}
    assert await snapshot(world, sid) == before

    listed = await frank.get("/approvals")
    assert f'id="select-{proposal}"' in listed.text
    assert f'href="/settlements/{sid}"' in listed.text and "as: failed" in listed.text
    approved = await decide(frank, "approve", proposal)
    assert outcomes(approved) == {proposal: ("done", "")}
    assert (await snapshot(world, sid))["status"] == "failed"
    again = await decide(frank, "approve", proposal)
    assert outcomes(again) == {proposal: ("refused", "proposal_decided")}
    assert await audit_of(world, f"settlement:{sid}") == [("erin", "frank")]
    audit = await frank.get("/audit", params={"target": f"settlement:{sid}"})
    assert '<td class="actor">erin</td>' in audit.text
    assert '<td class="approved-by">frank</td>' in audit.text
    decided = await frank.get("/approvals", params={"status": "approved"})
    assert row_ids(decided, "proposal") == [proposal]
    assert row_ids(await frank.get("/approvals"), "proposal") == []


async def test_an_approval_the_rail_contradicts_fails_and_changes_nothing(
    world: World, erin: httpx.AsyncClient, frank: httpx.AsyncClient
) -> None:
    sid = await referred(world)
    await made_at_rail(world, sid)  # the rail shows a transfer: "failed" is contradicted
    asked = await erin.post(
        "/review/resolve",
        data={"ids": sid, "as": "failed", "reason": "gone", "csrf": await csrf_of(erin)},
    )
    before = await snapshot(world, sid)
    proposal = proposal_of(asked, sid)
    answered = await decide(frank, "approve", proposal)
    assert outcomes(answered) == {proposal: ("refused", "rail_disagrees")}
    assert await snapshot(world, sid) == before
    failed = await frank.get("/approvals", params={"status": "failed"})
    assert row_ids(failed, "proposal") == [proposal] and "rail_disagrees" in failed.text


async def test_a_proposal_rejected_or_withdrawn_closes_nothing(
    world: World, erin: httpx.AsyncClient, frank: httpx.AsyncClient
) -> None:
    first, second = await plant_breaks(world.pool, 2)
    asked = await erin.post(
        "/breaks/resolve",
        data={
            "ids": [str(first), str(second)],
            "reason": "written off",
            "csrf": await csrf_of(erin, "/breaks"),
        },
    )
    rejected_id, withdrawn_id = proposal_of(asked, str(first)), proposal_of(asked, str(second))
    assert 'data-done="0" data-refused="0" data-proposed="2"' in asked.text
    rejected = await decide(frank, "reject", rejected_id, reason="not ours to write off")
    assert outcomes(rejected) == {rejected_id: ("done", "")}
    not_frank = await decide(frank, "withdraw", withdrawn_id)
    assert outcomes(not_frank) == {withdrawn_id: ("refused", "not_proposer")}
    withdrawn = await decide(erin, "withdraw", withdrawn_id)
    assert outcomes(withdrawn) == {withdrawn_id: ("done", "")}
    late = await decide(frank, "approve", rejected_id)
    assert outcomes(late) == {rejected_id: ("refused", "proposal_decided")}
    statuses = await world.pool.fetch(
        "SELECT status FROM reconciliation_breaks WHERE id = ANY($1)", [first, second]
    )
    assert [r["status"] for r in statuses] == ["open", "open"]
    assert await audit_of(world, f"break:{first}") == []
    shown = await frank.get("/approvals", params={"status": "rejected"})
    assert row_ids(shown, "proposal") == [rejected_id] and "not ours to write off" in shown.text
    gone = await frank.get("/approvals", params={"status": "withdrawn"})
    assert row_ids(gone, "proposal") == [withdrawn_id]


async def test_approvals_need_a_selection_and_a_known_status(frank: httpx.AsyncClient) -> None:
    csrf = await csrf_of(frank, "/approvals")
    nothing = await frank.post("/approvals/approve", data={"csrf": csrf})
    unknown = await frank.get("/approvals", params={"status": "lost"})
    forged = await frank.post("/approvals/approve", data={"ids": "1"})
    assert (nothing.status_code, error_code(nothing)) == (400, "nothing_selected")
    assert (unknown.status_code, error_code(unknown)) == (400, "invalid_status")
    assert (forged.status_code, error_code(forged)) == (403, "csrf_missing")


async def test_a_proposed_replay_links_to_its_webhook_and_replays_once_approved(
    world: World, erin: httpx.AsyncClient, frank: httpx.AsyncClient
) -> None:
    dead = await plant_inbox(world.pool, "dead")
    asked = await erin.post(
        "/webhooks/replay", data={"ids": str(dead), "csrf": await csrf_of(erin, "/webhooks")}
    )
    proposal = proposal_of(asked, str(dead))
    listed = await frank.get("/approvals")
    assert f'href="/webhooks?status=dead&amp;after={dead - 1}"' in listed.text
    assert await world.pool.fetchval("SELECT status FROM inbox_events WHERE id = $1", dead) == (
        "dead"
    )
    assert outcomes(await decide(frank, "approve", proposal)) == {proposal: ("done", "")}
    assert await world.pool.fetchval("SELECT status FROM inbox_events WHERE id = $1", dead) == (
        "received"
    )
    assert await audit_of(world, str(dead)) == [("erin", "frank")]
