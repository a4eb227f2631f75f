"""Operators correct the books from a break on the real PostgreSQL, against the served rail
simulator: a write-off posts a balanced platform entry in the transaction of its audit row
and the break's close (an audit row that cannot be written leaves no posting), and waits for
a second operator in two-person mode; an adjustment refuses an account the chart does not
have; a correction moves a settlement only by a step the state machine allows and only when
the rail agrees at that moment; a match refuses an object of another amount."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from services.domain.break_work import BreakAction as A
from services.domain.proposal import Move
from services.domain.settlement import SettlementStatus as S
from services.operations.approval_policy import ONE_PERSON, Policy
from services.operations.desk import OperationsDesk
from services.operations.errors import BadRequest, OperationsError, Refused
from services.operations.rail_lookup import StripeLookup
from tests.conftest import assert_books_balance
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    made_at_rail,
    new_id,
    plant_break,
    rail,
    snapshot,
    world,
)

pytestmark = [pytest.mark.integration, pytest.mark.money]
__all__ = ["rail", "template", "world"]
TWO_PERSON = Policy(True, timedelta(days=1))
REFUSE_WRITE_OFF_AUDIT = [
    """CREATE FUNCTION refuse_write_off_audit() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
           IF NEW.action = 'break.write_off' THEN RAISE EXCEPTION 'audit refused'; END IF;
           RETURN NEW;
       END $$""",
    """CREATE TRIGGER refuse_write_off_audit BEFORE INSERT ON operator_actions
       FOR EACH ROW EXECUTE FUNCTION refuse_write_off_audit()""",
]


@pytest.fixture
async def desk(world: World, rail: StripeLookup) -> AsyncIterator[OperationsDesk]:
    yield OperationsDesk(world.pool, rail, ONE_PERSON)


async def refused(work: Any) -> OperationsError:
    with pytest.raises(OperationsError) as raised:
        await work
    return raised.value


async def booked(world: World, kind: str) -> dict[str, int]:
    """Each platform account's net over the entries of `kind`, which belong to no settlement."""
    rows = await world.pool.fetch(
        "SELECT p.account_id, sum(p.amount)::bigint AS net FROM journal_entries e "
        "JOIN postings p ON p.entry_id = e.id "
        "WHERE e.kind = $1 AND e.tenant = 'platform' AND e.settlement_id IS NULL "
        "GROUP BY p.account_id",
        kind,
    )
    return {r["account_id"]: r["net"] for r in rows}


async def break_row(world: World, break_id: int) -> dict[str, Any]:
    row = await world.pool.fetchrow(
        "SELECT status, resolved_by, resolution_kind, assignee FROM reconciliation_breaks "
        "WHERE id = $1",
        break_id,
    )
    assert row is not None
    return dict(row)


async def audit_of(world: World, break_id: int) -> list[tuple[str, str, str | None]]:
    rows = await world.pool.fetch(
        "SELECT actor, action, approved_by FROM operator_actions WHERE target = $1 ORDER BY id",
        f"break:{break_id}",
    )
    return [(r["actor"], r["action"], r["approved_by"]) for r in rows]


async def paid_but_never_sent(world: World) -> str:
    """A settlement the ledger says paid, whose instruction the rail took and whose transfer
    the rail does not have."""
    sid = await world.accept()
    await world.pool.execute(
        "UPDATE rail_instructions SET status = 'transferred', rail_reference = 'tr_vanished' "
        "WHERE settlement_id = $1::uuid",
        sid,
    )
    await world.move(sid, S.PAID)
    return sid


async def test_a_write_off_posts_a_balanced_entry_audited_and_resolves_the_break(
    world: World, desk: OperationsDesk
) -> None:
    # The rail paid 200 less than the ledger booked: settle found 200, booked the other way.
    break_id = await plant_break(world.pool, settlement_id=new_id(), expected=700, actual=500)
    done = await desk.act(A.WRITE_OFF, str(break_id), {}, reason="rail fee", operator="erin")
    assert not done.proposed
    assert done.document["break"]["resolution_kind"] == "write_off"
    assert await booked(world, "write_off") == {
        "platform:funding:EUR": 200,
        "platform:write_offs:EUR": -200,
    }
    assert done.document["entry"]["kind"] == "write_off"
    assert await break_row(world, break_id) == {
        "status": "resolved",
        "resolved_by": "erin",
        "resolution_kind": "write_off",
        "assignee": None,
    }
    assert await audit_of(world, break_id) == [
        ("erin", "break.resolve", None),
        ("erin", "break.write_off", None),
    ]
    detail = await world.pool.fetchval(
        "SELECT detail FROM operator_actions WHERE action = 'break.write_off'"
    )
    assert json.loads(detail)["entry_id"] == done.document["entry"]["id"]
    await assert_books_balance(world.pool)
    again = await refused(desk.act(A.WRITE_OFF, str(break_id), {}, reason="x", operator="erin"))
    assert again.code == "break_closed"
    other = await plant_break(world.pool, settlement_id=new_id())
    typed = await refused(
        desk.act(A.WRITE_OFF, str(other), {"amount": 5}, reason="x", operator="erin")
    )
    assert (typed.status, typed.code, typed.field) == (400, "amount_from_break", "amount")


async def test_a_write_off_whose_audit_row_fails_posts_nothing(
    world: World, desk: OperationsDesk
) -> None:
    break_id = await plant_break(
        world.pool,
        "balance_mismatch",
        field="balance",
        expected=1000,
        actual=1300,
    )
    for statement in REFUSE_WRITE_OFF_AUDIT:
        await world.pool.execute(statement)
    with pytest.raises(asyncpg.RaiseError, match="audit refused"):
        await desk.act(A.WRITE_OFF, str(break_id), {}, reason="lost", operator="erin")
    assert await booked(world, "write_off") == {}
    assert (
        await world.pool.fetchval(
            "SELECT count(*) FROM accounts WHERE id = 'platform:write_offs:EUR'"
        )
        == 0
    )
    assert (await break_row(world, break_id))["status"] == "open"
    assert await audit_of(world, break_id) == []


async def test_a_write_off_waits_for_a_second_operator_in_two_person_mode(
    world: World, rail: StripeLookup
) -> None:
    two = OperationsDesk(world.pool, rail, TWO_PERSON)
    break_id = await plant_break(
        world.pool, "balance_mismatch", field="balance", expected=1000, actual=1300
    )
    proposed = await two.act(A.WRITE_OFF, str(break_id), {}, reason="lost", operator="alice")
    assert proposed.proposed and proposed.document["action"] == "break.write_off"
    assert await booked(world, "write_off") == {}
    assert (await break_row(world, break_id))["status"] == "open"
    own = await refused(two.decide(Move.APPROVE, str(proposed.document["id"]), operator="alice"))
    assert own.code == "same_operator"
    approved = await two.decide(Move.APPROVE, str(proposed.document["id"]), operator="bob")
    assert approved["status"] == "approved"
    # More left the rail's balance than was booked: settle lost 300.
    assert await booked(world, "write_off") == {
        "platform:funding:EUR": -300,
        "platform:write_offs:EUR": 300,
    }
    assert await audit_of(world, break_id) == [
        ("alice", "break.resolve", "bob"),
        ("alice", "break.write_off", "bob"),
    ]
    await assert_books_balance(world.pool)


async def test_a_break_without_an_amount_is_not_written_off(
    world: World, desk: OperationsDesk
) -> None:
    currency = await plant_break(
        world.pool, "currency_mismatch", field="currency", expected="EUR", actual="USD"
    )
    sid = await world.accept()  # accepted, not paid: nothing left for the payee
    missing = await plant_break(
        world.pool, "missing_at_rail", settlement_id=sid, field="count", expected=1, actual=0
    )
    for break_id in (currency, missing):
        refusal = await refused(
            desk.act(A.WRITE_OFF, str(break_id), {}, reason="x", operator="erin")
        )
        assert (refusal.status, refusal.code) == (409, "no_amount")
        assert (await break_row(world, break_id))["status"] == "open"
    assert await booked(world, "write_off") == {}


async def test_writing_off_a_paid_transfer_the_rail_never_made_books_the_money_back(
    world: World, desk: OperationsDesk
) -> None:
    sid = await paid_but_never_sent(world)
    break_id = await plant_break(
        world.pool, "missing_at_rail", settlement_id=sid, field="count", expected=1, actual=0
    )
    await desk.act(A.WRITE_OFF, str(break_id), {}, reason="never sent", operator="erin")
    assert await booked(world, "write_off") == {
        "platform:funding:EUR": 700,
        "platform:write_offs:EUR": -700,
    }
    assert (await snapshot(world, sid))["status"] == "paid"  # the settlement is not touched


async def test_an_adjustment_books_to_the_chosen_account_and_refuses_one_the_chart_lacks(
    world: World, desk: OperationsDesk
) -> None:
    break_id = await plant_break(
        world.pool, "balance_mismatch", field="balance", expected=1000, actual=1120
    )
    asked = {"account": "rail_fees", "direction": "debit", "amount": 120, "currency": "EUR"}
    for wrong, code in (
        ({"account": "petty_cash"}, "unknown_account"),
        ({"account": "funding"}, "unknown_account"),
        ({"direction": "sideways"}, "invalid_direction"),
        ({"amount": 0}, "invalid_amount"),
        ({"amount": "120"}, "invalid_amount"),
        ({"currency": "eur"}, "invalid_currency"),
    ):
        refusal = await refused(
            desk.act(A.ADJUST, str(break_id), asked | wrong, reason="fee", operator="erin")
        )
        assert isinstance(refusal, BadRequest)
        assert (refusal.status, refusal.code) == (400, code)
    other = await refused(
        desk.act(A.ADJUST, str(break_id), asked | {"currency": "USD"}, reason="x", operator="e")
    )
    assert other.code == "wrong_currency"
    assert await booked(world, "adjustment") == {}
    done = await desk.act(A.ADJUST, str(break_id), asked, reason="rail fee", operator="erin")
    assert done.document["entry"]["kind"] == "adjustment"
    assert await booked(world, "adjustment") == {
        "platform:funding:EUR": -120,
        "platform:rail_fees:EUR": 120,
    }
    assert (await break_row(world, break_id))["status"] == "open"  # an adjustment closes nothing
    assert await audit_of(world, break_id) == [("erin", "break.adjust", None)]
    await assert_books_balance(world.pool)


async def test_a_paid_settlement_whose_money_never_left_is_reversed_by_a_new_step(
    world: World, desk: OperationsDesk
) -> None:
    sid = await paid_but_never_sent(world)
    break_id = await plant_break(
        world.pool, "missing_at_rail", settlement_id=sid, field="count", expected=1, actual=0
    )
    done = await desk.act(
        A.CORRECT, str(break_id), {"as": "reversed"}, reason="never sent", operator="erin"
    )
    assert done.document["settlement"]["status"] == "reversed"
    after = await snapshot(world, sid)
    assert (after["status"], after["net"]) == ("reversed", {})
    steps = await world.pool.fetch(
        "SELECT from_status, to_status, actor, reason FROM settlement_transitions "
        "WHERE settlement_id = $1::uuid ORDER BY sequence",
        sid,
    )
    assert [tuple(s) for s in steps][-2:] == [
        ("accepted", "paid", "test", None),
        ("paid", "reversed", "erin", "never sent"),
    ]
    published = await world.pool.fetchval(
        "SELECT count(*) FROM outbox WHERE settlement_id = $1::uuid", uuid.UUID(sid)
    )
    assert published == len(steps)  # every step published, booking's included
    assert await break_row(world, break_id) == {
        "status": "resolved",
        "resolved_by": "erin",
        "resolution_kind": "correct",
        "assignee": None,
    }
    assert await audit_of(world, break_id) == [
        ("erin", "break.resolve", None),
        ("erin", "break.correct", None),
    ]
    await assert_books_balance(world.pool)


async def test_a_correction_the_rail_contradicts_or_the_state_machine_forbids_changes_nothing(
    world: World, desk: OperationsDesk
) -> None:
    sid = await paid_but_never_sent(world)
    await made_at_rail(world, sid)  # the rail shows the transfer, paid: the money did leave
    break_id = await plant_break(
        world.pool, "missing_at_rail", settlement_id=sid, field="count", expected=1, actual=0
    )
    before = await snapshot(world, sid)
    disagrees = await refused(
        desk.act(A.CORRECT, str(break_id), {"as": "reversed"}, reason="x", operator="erin")
    )
    assert (disagrees.status, disagrees.code) == (409, "rail_disagrees")
    illegal = await refused(
        desk.act(A.CORRECT, str(break_id), {"as": "failed"}, reason="x", operator="erin")
    )
    assert (illegal.code, illegal.field) == ("illegal_correction", "as")
    unknown = await refused(
        desk.act(A.CORRECT, str(break_id), {"as": "lost"}, reason="x", operator="erin")
    )
    assert (unknown.status, unknown.code) == (400, "invalid_as")
    assert await snapshot(world, sid) == before
    assert (await break_row(world, break_id))["status"] == "open"
    assert await audit_of(world, break_id) == []


async def test_a_match_records_the_reference_through_the_guarded_write_and_resolves(
    world: World, desk: OperationsDesk
) -> None:
    sid = await world.accept()
    stray = await made_at_rail(world, new_id(), 700)  # names a settlement the ledger lacks
    break_id = await plant_break(
        world.pool,
        "unknown_at_rail",
        rail_object_id=stray,
        field="settlement_id",
        expected=None,
        actual=new_id(),
    )
    done = await desk.act(
        A.MATCH, str(break_id), {"settlement_id": sid}, reason="same payout", operator="erin"
    )
    assert done.document["settlement"]["rail_reference"] == stray
    after = await snapshot(world, sid)
    assert (after["status"], after["rail_reference"]) == ("accepted", stray)
    step = await world.pool.fetchrow(
        "SELECT from_status, to_status, actor FROM settlement_transitions "
        "WHERE settlement_id = $1::uuid ORDER BY sequence DESC LIMIT 1",
        sid,
    )
    assert tuple(step) == ("accepted", "accepted", "erin")  # a reference recorded, audited
    assert (await break_row(world, break_id))["resolution_kind"] == "match"
    other = await world.accept()
    stray_too = await plant_break(world.pool, "unknown_at_rail", rail_object_id=stray)
    claimed = await refused(
        desk.act(A.MATCH, str(stray_too), {"settlement_id": other}, reason="x", operator="e")
    )
    assert claimed.code == "object_claimed"


async def test_a_match_refuses_an_object_of_another_amount(
    world: World, desk: OperationsDesk
) -> None:
    sid = await world.accept()
    stray = await made_at_rail(world, new_id(), 500)
    break_id = await plant_break(world.pool, "unknown_at_rail", rail_object_id=stray)
    before = await snapshot(world, sid)
    refusal = await refused(
        desk.act(A.MATCH, str(break_id), {"settlement_id": sid}, reason="x", operator="erin")
    )
    assert isinstance(refusal, Refused)
    assert (refusal.code, refusal.field) == ("rail_disagrees", "amount")
    wrong_type = await plant_break(world.pool, "amount_mismatch", rail_object_id=stray)
    not_unknown = await refused(
        desk.act(A.MATCH, str(wrong_type), {"settlement_id": sid}, reason="x", operator="e")
    )
    assert not_unknown.code == "wrong_break_type"
    assert await snapshot(world, sid) == before
    assert (await break_row(world, break_id))["status"] == "open"
