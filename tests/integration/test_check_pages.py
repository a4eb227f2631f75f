"""`settle check` reading settlements a page at a time: any page size gives the same report, and
an offender on a page's edge is counted once, whichever side of it the next page starts."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from railsim.params import Kind
from services.contracts import avro
from tests.events import settlement_event
from tests.integration.check_support import TENANT, World, finding, results, template, world
from tests.integration.test_check_findings import plant_unapplied, send_to_events
from tools.check.report import as_json

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]


def by_id(world: World) -> list[str]:
    """The world's settlement ids in the order the pages read them."""
    return sorted([world.paid, world.failed, world.review, world.reversed])


def pay_twice_more(world: World, sid: str) -> None:
    """Two more transfers at the rail for `sid`, made without a key: more than one effect."""
    for _ in range(2):
        pairs = [
            ("amount", "700"),
            ("currency", "eur"),
            ("destination", "acct_1Q2w3E"),
            ("metadata[settlement_id]", sid),
        ]
        assert world.sim.create(Kind.TRANSFER, pairs).status == 200


async def plant_strays(world: World, *sids: str) -> None:
    """A well-formed event for each of `sids`, which the database does not hold."""
    values = [
        avro.encode(
            "SettlementEvent",
            settlement_event(
                "paid", settlement_id=sid, tenant=TENANT, amount=700, occurred_at=datetime.now(UTC)
            ),
        )
        for sid in sids
    ]
    await send_to_events(world, *values)


async def test_every_page_size_gives_the_same_report(world: World) -> None:
    ids = by_id(world)
    pay_twice_more(world, ids[1])
    # Strays below every id, between the second and third, and above every id.
    # (UUIDs: a settlement id that is not one is an undecodable event, not a stray.)
    between = str(uuid.UUID(int=uuid.UUID(ids[1]).int + 1))
    strays = [str(uuid.UUID(int=0)), between, str(uuid.UUID(int=2**128 - 1))]
    await plant_strays(world, *strays)
    lost = await plant_unapplied(world)

    reports = {n: as_json(await world.check(page_size=n)) for n in (1, 2, 3, 100)}

    assert all(report == reports[100] for report in reports.values()), reports
    complete = reports[100]["events_complete"]["detail"]["events_of_unknown_settlements"]
    assert complete == {"count": 3, "first": sorted(strays)}
    effects = reports[100]["no_double_effect"]["detail"]["effects_over_one"]
    assert effects == {"count": 1, "first": [ids[1]]}
    webhooks = reports[100]["nothing_lost"]["detail"]["webhooks_unapplied_beyond_bound"]
    assert webhooks == {"count": 2, "first": lost}
    assert reports[100]["counts"]["settlements"] == 4


async def test_offenders_on_a_page_edge_are_found_once(world: World) -> None:
    ids = by_id(world)
    # Pages of two: ids[1] ends the first page, ids[2] starts the second.
    for sid in ids[1:3]:
        pay_twice_more(world, sid)

    report = await world.check(page_size=2)

    verdict = results(report)["no_double_effect"]
    assert finding(verdict, "effects_over_one") == (2, tuple(ids[1:3]))
    assert verdict.offenders[:2] == tuple(ids[1:3])
    assert report.counts["settlements"] == 4
