"""The console's actions go through the CLI's own functions: each selected item is done or
refused exactly as the CLI would (a resolution the rail contradicts, a closed break, a
mismatch replayed), each done item writes its audit row under the signed-in operator, and
the page shows every item's outcome."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.check_support import World, template
from tests.integration.console_support import (
    browser,
    clock,
    csrf_of,
    error_code,
    outcomes,
    plant_inbox,
    row_ids,
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
__all__ = ["browser", "clock", "rail", "template", "world"]


async def audit_rows(world: World, target: str) -> list[tuple[str, str]]:
    rows = await world.pool.fetch(
        "SELECT actor, action FROM operator_actions WHERE target = $1", target
    )
    return [(r["actor"], r["action"]) for r in rows]


async def test_a_bulk_resolution_does_what_the_rail_allows_and_refuses_the_rest(
    world: World, browser: httpx.AsyncClient
) -> None:
    contradicted, clear = await referred(world), await referred(world)
    await made_at_rail(world, contradicted)  # the rail shows a transfer: "failed" is refused
    before = await snapshot(world, contradicted)
    queue = await browser.get("/review")
    assert set(row_ids(queue, "review-item")) >= {contradicted, clear}
    assert "rail answer unclear after 8 attempts" in queue.text
    page = await browser.post(
        "/review/resolve",
        data={
            "ids": [contradicted, clear],
            "as": "failed",
            "reason": "nothing left the bank",
            "csrf": await csrf_of(browser),
        },
    )
    assert page.status_code == 200
    assert outcomes(page) == {
        contradicted: ("refused", "rail_disagrees"),
        clear: ("done", ""),
    }
    assert 'id="outcome-summary"' in page.text and 'data-done="1" data-refused="1"' in page.text
    assert await snapshot(world, contradicted) == before
    assert (await snapshot(world, clear))["status"] == "failed"
    assert await audit_rows(world, f"settlement:{clear}") == [("erin", "review.resolve")]
    assert await audit_rows(world, f"settlement:{contradicted}") == []
    assert clear not in row_ids(page, "review-item")  # the queue shown again, without it


async def test_an_action_without_a_reason_or_a_selection_is_refused_on_the_page(
    world: World, browser: httpx.AsyncClient
) -> None:
    sid = await referred(world)
    csrf = await csrf_of(browser)
    no_reason = await browser.post(
        "/review/resolve", data={"ids": sid, "as": "failed", "reason": " ", "csrf": csrf}
    )
    nothing = await browser.post(
        "/review/resolve", data={"as": "failed", "reason": "r", "csrf": csrf}
    )
    bad_as = await browser.post(
        "/review/resolve", data={"ids": sid, "as": "lost", "reason": "r", "csrf": csrf}
    )
    assert outcomes(no_reason) == {sid: ("refused", "reason_required")}
    assert (nothing.status_code, error_code(nothing)) == (400, "nothing_selected")
    assert (bad_as.status_code, error_code(bad_as)) == (400, "invalid_as")
    assert (await snapshot(world, sid))["status"] == "needs_review"


async def test_breaks_resolve_in_bulk_audited_and_a_closed_one_is_refused(
    world: World, browser: httpx.AsyncClient
) -> None:
    open_ids = await plant_breaks(world.pool, 2)
    (closed,) = await plant_breaks(world.pool, 1, status="resolved")
    page = await browser.post(
        "/breaks/resolve",
        data={
            "ids": [*map(str, open_ids), str(closed)],
            "reason": "written off",
            "csrf": await csrf_of(browser),
        },
    )
    assert outcomes(page) == {
        str(open_ids[0]): ("done", ""),
        str(open_ids[1]): ("done", ""),
        str(closed): ("refused", "break_closed"),
    }
    statuses = await world.pool.fetch(
        "SELECT status, resolved_by FROM reconciliation_breaks WHERE id = ANY($1) ORDER BY id",
        open_ids,
    )
    assert [(r["status"], r["resolved_by"]) for r in statuses] == [("resolved", "erin")] * 2
    for item in open_ids:
        assert await audit_rows(world, f"break:{item}") == [("erin", "break.resolve")]


async def test_a_dead_webhook_replays_audited_and_a_mismatch_never(
    world: World, browser: httpx.AsyncClient
) -> None:
    dead, parked = await plant_inbox(world.pool, "dead"), await plant_inbox(world.pool, "parked")
    mismatch = await plant_inbox(world.pool, "mismatch")
    page = await browser.post(
        "/webhooks/replay",
        data={
            "ids": [str(dead), str(parked), str(mismatch), "999999999"],
            "csrf": await csrf_of(browser, "/webhooks"),
        },
    )
    assert outcomes(page) == {
        str(dead): ("done", ""),
        str(parked): ("done", ""),
        str(mismatch): ("refused", "mismatch_not_replayable"),
        "999999999": ("refused", "not_found"),
    }
    statuses = await world.pool.fetch(
        "SELECT id, status FROM inbox_events WHERE id = ANY($1)", [dead, parked, mismatch]
    )
    assert {r["id"]: r["status"] for r in statuses} == {
        dead: "received",
        parked: "received",
        mismatch: "mismatch",
    }
    assert await audit_rows(world, str(dead)) == [("erin", "inbox.replay")]
    assert await audit_rows(world, str(mismatch)) == []
