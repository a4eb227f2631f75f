"""Operators resolve settlements under review on the real PostgreSQL against the served rail
simulator: a resolution the rail contradicts is refused and changes nothing; an accepted one
moves the settlement through the guarded write path with its postings and writes exactly one
audit row; a retry re-arms the instruction and the dispatcher sends it under the same key;
`operator_actions` refuses UPDATE and DELETE."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from services.domain.instruction import Resolution
from services.domain.settlement import SettlementStatus as S
from services.operations.errors import NotFound, RailUnavailable, Refused
from services.operations.rail_lookup import StripeLookup
from services.operations.review import list_review, resolve
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    made_at_rail,
    new_id,
    objects_at_rail,
    rail,
    referred,
    settle_as_operator,
    snapshot,
    world,
)
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration
__all__ = ["rail", "template", "world"]
R = Resolution


async def resolved(world: World, rail: StripeLookup, sid: str, resolution: Resolution) -> object:
    async with world.pool.acquire() as conn:
        return await resolve(
            conn,
            rail,
            sid,
            resolution,
            reason="checked at the rail",
            operator="alice",
            now=datetime.now(UTC),
        )


async def refused(world: World, rail: StripeLookup, sid: str, resolution: Resolution) -> Refused:
    with pytest.raises(Refused) as raised:
        await resolved(world, rail, sid, resolution)
    return raised.value


async def test_a_resolution_the_rail_contradicts_is_refused_and_changes_nothing(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    other = await referred(world)
    await made_at_rail(world, sid)
    await made_at_rail(world, other, amount=699)
    before, other_before = await snapshot(world, sid), await snapshot(world, other)
    for resolution in (R.FAILED, R.RETRY):
        assert (await refused(world, rail, sid, resolution)).code == "rail_disagrees"
    # Paid needs the object the settlement asked for: 699 is not 700.
    wrong = await refused(world, rail, other, R.PAID)
    assert (wrong.code, wrong.field) == ("rail_disagrees", "amount")
    # Nothing at the rail for a third one: paid has no object to adopt.
    empty = await referred(world)
    assert "0 objects" in (await refused(world, rail, empty, R.PAID)).message
    assert await snapshot(world, sid) == before and await snapshot(world, other) == other_before
    assert before["actions"] == [] and before["status"] == "needs_review"


async def test_paid_the_rail_confirms_books_the_payout_and_audits_it_once(
    world: World, rail: StripeLookup
) -> None:
    sid = await world.accept()
    await world.dispatch(sid)  # the rail made the transfer; the webhook never came
    await world.move(sid, S.NEEDS_REVIEW, reason="no webhook after 7 days")
    (listed,) = [i for i in await list_review(world.pool, None, 50) if i["id"] == sid]
    transfer = listed["rail_reference"]
    assert transfer.startswith("tr_") and listed["instruction_status"] == "transferred"
    before = await snapshot(world, sid)
    assert before["net"] == {"funding": -700, "in_transit": 700}
    await resolved(world, rail, sid, R.PAID)
    after = await snapshot(world, sid)
    assert (after["status"], after["rail_reference"], after["instruction"]) == (
        "paid",
        transfer,
        "transferred",
    )
    assert after["version"] == before["version"] + 1
    assert after["net"] == {"funding": -700, "paid_out": 700}
    (action,) = after["actions"]
    assert (action["actor"], action["action"]) == ("alice", "review.resolve")
    assert action["detail"] == {
        "as": "paid",
        "reason": "checked at the rail",
        "rail_objects": [transfer],
    }
    assert action["before"]["status"] == "needs_review" and action["after"]["status"] == "paid"
    step = await world.pool.fetchrow(
        "SELECT to_status, actor, reason FROM settlement_transitions WHERE settlement_id = $1 "
        "ORDER BY sequence DESC LIMIT 1",
        uuid.UUID(sid),
    )
    assert tuple(step) == ("paid", "alice", "checked at the rail")
    assert (await refused(world, rail, sid, R.PAID)).code == "not_in_review"
    assert len((await snapshot(world, sid))["actions"]) == 1


async def test_failed_with_nothing_at_the_rail_returns_the_money(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    assert (await snapshot(world, sid))["net"] == {"funding": -700, "payable": 700}
    await resolved(world, rail, sid, R.FAILED)
    after = await snapshot(world, sid)
    assert (after["status"], after["instruction"], after["net"]) == ("failed", "failed", {})
    assert [a["after"]["instruction"] for a in after["actions"]] == ["failed"]


async def test_retry_re_arms_the_instruction_and_the_dispatcher_sends_it_once(
    world: World, rail: StripeLookup
) -> None:
    sid = await referred(world)
    await resolved(world, rail, sid, R.RETRY)
    armed = await snapshot(world, sid)
    assert (armed["status"], armed["instruction"], armed["attempts"]) == (
        "needs_review",
        "pending",
        0,
    )
    # Armed again, it is in flight: a second resolution waits for the dispatcher's answer.
    assert (await refused(world, rail, sid, R.FAILED)).code == "attempt_in_flight"
    await world.dispatch(sid)  # pass 1 claims only what was never sent
    assert (await snapshot(world, sid))["instruction"] == "pending"
    assert await world.sweep() == 1  # pass 2 takes it, looking first where it must
    sent = await snapshot(world, sid)
    assert (sent["status"], sent["instruction"]) == ("submitted", "transferred")
    assert sent["net"] == {"funding": -700, "in_transit": 700}
    assert await objects_at_rail(world, sid) == [sent["rail_reference"]]
    assert len(sent["actions"]) == 1


async def test_an_unknown_settlement_is_not_found(world: World, rail: StripeLookup) -> None:
    with pytest.raises(NotFound):
        await resolved(world, rail, new_id(), R.FAILED)


async def test_operator_actions_refuse_update_and_delete(world: World, rail: StripeLookup) -> None:
    sid = await referred(world)
    await resolved(world, rail, sid, R.FAILED)
    target = f"settlement:{sid}"
    for statement in (
        "UPDATE operator_actions SET actor = 'mallory' WHERE target = $1",
        "DELETE FROM operator_actions WHERE target = $1",
    ):
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await world.pool.execute(statement, target)
    assert [a["actor"] for a in (await snapshot(world, sid))["actions"]] == ["alice"]


async def settle_review(world: World, *args: str) -> tuple[int, dict[str, Any]]:
    given = ("review", "resolve", *args, "--reason", "nothing sent", "--operator", "bob")
    status, out = await settle_as_operator(world, *given, "--json")
    return status, json.loads(out)


async def test_settle_review_resolve_exits_1_with_the_refusals_code(world: World) -> None:
    sid = await referred(world)
    await made_at_rail(world, sid)
    status, out = await settle_review(world, sid, "--as", "failed")
    assert (status, out["error"]["code"]) == (1, "rail_disagrees")
    assert (await snapshot(world, sid))["status"] == "needs_review"


async def test_bulk_review_resolves_each_id_on_its_own(world: World, tmp_path: Path) -> None:
    good, contradicted = await referred(world), await referred(world)
    await made_at_rail(world, contradicted)
    unknown = new_id()
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{good}\n{contradicted}\n{unknown}\n")
    status, summary = await settle_review(world, "--from-file", str(ids), "--as", "failed")
    assert status == 1
    assert (summary["done"], summary["refused"]) == (1, 2)
    assert [(i["id"], i["code"]) for i in summary["items"]] == [
        (good, None),
        (contradicted, "rail_disagrees"),
        (unknown, "not_found"),
    ]
    assert (await snapshot(world, good))["status"] == "failed"
    assert (await snapshot(world, contradicted))["actions"] == []


async def test_an_unreachable_rail_refuses_every_resolution(world: World) -> None:
    sid = await referred(world)
    before = await snapshot(world, sid)
    closed = f"http://127.0.0.1:{free_ports()}"  # nothing listens there
    lookup = StripeLookup("sk_test_x", api_base=closed)
    try:
        for resolution in R:
            with pytest.raises(RailUnavailable) as raised:
                await resolved(world, lookup, sid, resolution)
            assert (raised.value.status, raised.value.code) == (503, "rail_unreadable")
    finally:
        await lookup.aclose()
    assert await snapshot(world, sid) == before
