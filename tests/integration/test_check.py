"""`settle check` on the real PostgreSQL, Kafka and a served rail simulator: a healthy world
holds every guarantee; each planted breakage is caught and names its offender (the world is
tests/integration/check_support.py; the planted lost webhooks and stray messages are in
test_check_findings.py).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from railsim.params import Kind
from services.domain.settlement import SettlementStatus as S
from tests.conftest import unique
from tests.integration.check_support import (
    TENANT,
    World,
    broken_only,
    finding,
    results,
    template,
    world,
)
from tools.check.run import wait_quiet

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]


async def test_a_healthy_world_holds_every_guarantee(world: World) -> None:
    report = await world.check()
    assert report.ok, report.results
    assert report.counts == {"settlements": 4, "events_read": 12, "settlements_with_effects": 3}
    assert all(r.count == 0 and r.offenders == () for r in report.results)


async def test_a_second_effect_at_the_rail_is_caught(world: World) -> None:
    # A create without a key: the rail cannot recognise it as the same payment.
    pairs = [
        ("amount", "700"),
        ("currency", "eur"),
        ("destination", "acct_1Q2w3E"),
        ("metadata[settlement_id]", world.paid),
    ]
    assert world.sim.create(Kind.TRANSFER, pairs).status == 200
    result = broken_only(await world.check(), "no_double_effect")
    assert result.offenders == (world.paid,)
    assert finding(result, "effects_over_one") == (1, (world.paid,))


async def test_money_moved_for_a_failed_instruction_is_caught(world: World) -> None:
    # The rail refused it and the books were reversed; a transfer made anyway is unpaid-for.
    pairs = [
        ("amount", "700"),
        ("currency", "eur"),
        ("destination", "acct_1Q2w3E"),
        ("metadata[settlement_id]", world.failed),
    ]
    assert world.sim.create(Kind.TRANSFER, pairs).status == 200
    result = broken_only(await world.check(), "no_double_effect")
    assert finding(result, "effects_behind_failed_instructions") == (1, (world.failed,))
    assert finding(result, "effects_over_one") == (0, ())


async def test_a_transferred_instruction_the_rail_has_no_effect_for_is_caught(
    world: World,
) -> None:
    # Recorded as transferred under a reference the rail never issued.
    async with world.pool.acquire() as conn:
        await conn.execute(
            "UPDATE rail_instructions SET status = 'transferred', rail_reference = 'tr_none' "
            "WHERE settlement_id = $1",
            uuid.UUID(world.failed),
        )
    result = broken_only(await world.check(), "no_double_effect")
    assert finding(result, "transferred_without_one_effect") == (1, (world.failed,))
    assert result.offenders == (world.failed,)


async def test_an_unbalanced_posting_is_caught(world: World) -> None:
    async with world.pool.acquire() as conn, conn.transaction():
        # The balance trigger and the account foreign key would refuse this; so would we.
        await conn.execute("SET LOCAL session_replication_role = replica")
        entry = await conn.fetchval(
            "SELECT id FROM journal_entries WHERE settlement_id = $1 AND kind = 'paid'",
            uuid.UUID(world.paid),
        )
        await conn.execute(
            "INSERT INTO postings (entry_id, account_id, amount, currency) "
            "VALUES ($1, $2, 5, 'EUR')",
            entry,
            f"{TENANT}:paid_out:EUR",
        )
    result = broken_only(await world.check(), "books_balance")
    assert finding(result, "entries_not_summing_to_zero") == (1, (str(entry),))
    assert finding(result, "currencies_not_summing_to_zero") == (1, ("EUR",))
    assert finding(result, "settlements_netting_wrong") == (1, (world.paid,))
    assert finding(result, "balances_differing_from_postings") == (1, (f"{TENANT}:paid_out:EUR",))


async def test_a_balance_disagreeing_with_its_postings_is_caught(world: World) -> None:
    account = f"{TENANT}:in_transit:EUR"
    async with world.pool.acquire() as conn:
        await conn.execute(
            "UPDATE account_balances SET balance = balance + 1 WHERE account_id = $1 AND shard = 3",
            account,
        )
    result = broken_only(await world.check(), "books_balance")
    assert result.offenders == (account,)
    assert finding(result, "balances_differing_from_postings") == (1, (account,))


async def test_an_outbox_row_left_unpublished_is_caught(world: World) -> None:
    await world.move(world.review, S.FAILED, reason="operator: not paid")
    async with world.pool.acquire() as conn:
        event = await conn.fetchval(
            "UPDATE outbox SET created_at = now() - interval '10 minutes' "
            "WHERE settlement_id = $1 AND published_at IS NULL RETURNING event_id",
            uuid.UUID(world.review),
        )
    report = await world.check()
    result = broken_only(report, "nothing_lost")
    assert finding(result, "outbox_unpublished_beyond_bound") == (1, (str(event),))
    # Within the bound it is in flight, not lost; its event may still be missing from Kafka.
    assert (await world.check(outbox_bound_s=3600)).ok


async def test_a_gap_in_a_settlements_events_is_caught(world: World) -> None:
    await world.move(world.review, S.PAID)
    async with world.pool.acquire() as conn:
        # Gone from the outbox, never sent: the event is lost between the outbox and Kafka.
        await conn.execute(
            "DELETE FROM outbox WHERE settlement_id = $1 AND sequence = 5",
            uuid.UUID(world.review),
        )
    await world.move(world.review, S.REVERSED, reason="transfer.reversed")
    assert await world.publish() == 1
    result = broken_only(await world.check(), "events_complete")
    assert finding(result, "sequence_gaps_or_repeats") == (1, (world.review,))


async def test_a_webhook_applied_twice_is_caught(world: World) -> None:
    async with world.pool.acquire() as conn:
        # Twin events of one change under two ids, both applied; the change key was not set.
        await conn.executemany(
            """INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id,
                                         settlement_id, payload, status, applied_at)
               VALUES ('stripe', $1, 'transfer.paid', 'tr_twin', $2, '\\x7b7d', 'applied',
                       now())""",
            [(unique("evt_"), uuid.UUID(world.paid)), (unique("evt_"), uuid.UUID(world.paid))],
        )
    result = broken_only(await world.check(), "webhooks_once")
    assert finding(result, "rail_changes_applied_twice") == (1, (world.paid,))


async def test_a_settlement_paid_twice_is_caught(world: World) -> None:
    # A second move into paid (paid -> paid would be a step recording a rail reference).
    async with world.pool.acquire() as conn:
        await conn.execute(
            """INSERT INTO settlement_transitions (settlement_id, sequence, from_status,
                                                   to_status, actor, occurred_at)
               VALUES ($1, 5, 'submitted', 'paid', 'inbox', now())""",
            uuid.UUID(world.paid),
        )
    verdicts = results(await world.check())
    assert finding(verdicts["webhooks_once"], "terminal_transitions_repeated") == (1, (world.paid,))
    # Its history now tells of an event Kafka never carried.
    assert verdicts["events_complete"].offenders == (world.paid,)
    assert finding(verdicts["events_complete"], "events_differing_from_transitions") == (
        1,
        (world.paid,),
    )


async def test_a_settlement_stuck_before_the_rail_is_caught(world: World) -> None:
    stuck = await world.accept()
    await world.publish()
    result = broken_only(await world.check(), "nothing_lost")
    assert finding(result, "settlements_not_settled") == (1, (stuck,))
    started = asyncio.get_running_loop().time()
    quiet, moving = await wait_quiet(world.url, 1.0)
    assert not quiet and moving["instructions"] == 1 and moving["settlements"] == 1
    assert asyncio.get_running_loop().time() - started >= 1.0


# Every finding of every check, as `settle check --json` lists them in each check's detail.
FINDINGS = {
    "no_double_effect": [
        "effects_over_one",
        "effects_behind_failed_instructions",
        "transferred_without_one_effect",
    ],
    "nothing_lost": [
        "settlements_not_settled",
        "outbox_unpublished_beyond_bound",
        "webhooks_unapplied_beyond_bound",
        "webhooks_set_aside_without_reason",
    ],
    "books_balance": [
        "currencies_not_summing_to_zero",
        "entries_not_summing_to_zero",
        "balances_differing_from_postings",
        "settlements_netting_wrong",
    ],
    "events_complete": [
        "sequence_gaps_or_repeats",
        "events_differing_from_transitions",
        "events_of_unknown_settlements",
        "undecodable_messages",
    ],
    "webhooks_once": ["rail_changes_applied_twice", "terminal_transitions_repeated"],
}


async def test_the_cli_exit_status_and_json(world: World) -> None:
    status, body = await world.settle_check("--wait-quiet", "5")
    assert status == 0 and body["ok"] is True and body["quiet"] is True
    assert [k for k in body if k in FINDINGS] == list(FINDINGS)
    for name, whats in FINDINGS.items():
        assert body[name] == {
            "ok": True,
            "count": 0,
            "offenders": [],
            "detail": {what: {"count": 0, "first": []} for what in whats},
        }

    pairs = [
        ("amount", "700"),
        ("currency", "eur"),
        ("destination", "acct_1Q2w3E"),
        ("metadata[settlement_id]", world.reversed),
    ]
    world.sim.create(Kind.TRANSFER, pairs)
    status, body = await world.settle_check()
    assert status == 1 and body["ok"] is False
    assert body["no_double_effect"]["offenders"] == [world.reversed]
    assert body["no_double_effect"]["detail"]["effects_over_one"] == {
        "count": 1,
        "first": [world.reversed],
    }

    status, body = await world.settle_check(SETTLE_KAFKA_BOOTSTRAP="127.0.0.1:1")
    assert status == 2 and body["ok"] is False and body["error"]["source"] == "kafka"
