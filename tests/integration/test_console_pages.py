"""The console's pages show what the database holds: the overview's figures and charts, a
search by each field a keyset page at a time, one settlement's whole story, the queues and
the audit trail; a reference holding markup is shown as text, never run."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from services.console import story_queries
from services.console.pages import settlements as settlements_page
from services.domain.settlement import SettlementStatus as S
from services.operations.rail_lookup import StripeLookup
from tests.conftest import unique
from tests.integration.check_support import World, template
from tests.integration.console_support import (
    Clock,
    accept,
    bearer,
    browser,
    client_of,
    clock,
    console_of,
    csrf_of,
    error_code,
    plant_inbox,
    row_ids,
)
from tests.integration.operator_support import plant_breaks, rail, referred, world

pytestmark = pytest.mark.integration
__all__ = ["browser", "clock", "rail", "template", "world"]


def count_of(page: httpx.Response, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*data-count="([0-9]*)"', page.text, re.S)
    if found is None:
        found = re.search(rf'id="{element_id}".*?data-count="([0-9]*)"', page.text, re.S)
    assert found is not None, element_id
    return found.group(1)


async def test_the_overview_shows_the_queues_breaks_charts_and_estimates(
    world: World, browser: httpx.AsyncClient, clock: Clock
) -> None:
    waiting = await accept(world)
    await referred(world)
    submitted = await accept(world)
    await world.dispatch(submitted)
    paid = [await accept(world) for _ in range(2)]
    for sid in paid:
        await world.dispatch(sid)
        await world.move(sid, S.PAID)
    await plant_breaks(world.pool, 2, "amount_mismatch")
    await plant_breaks(world.pool, 1, "missing_at_rail")
    await plant_breaks(world.pool, 1, "missing_at_rail", status="resolved")
    for status in ("dead", "dead", "parked", "mismatch"):
        await plant_inbox(world.pool, status)
    await world.pool.execute("ANALYZE settlements")
    clock.now = datetime.now(UTC)
    page = await browser.get("/")
    assert page.status_code == 200
    assert count_of(page, "breaks-open-amount_mismatch") == "2"
    assert count_of(page, "breaks-open-missing_at_rail") == "1"
    assert [count_of(page, f"inbox-{s}") for s in ("dead", "parked", "mismatch")] == ["2", "1", "1"]
    # `waiting` not yet dispatched; the referred one is under review, its instruction too
    assert count_of(page, "instructions-pending") == "1"
    assert count_of(page, "under-review") == "1"
    assert count_of(page, "state-paid") == "2" and count_of(page, "settlements-total") == "5"
    assert f'id="oldest-submitted" data-id="{submitted}"' in page.text
    assert waiting not in page.text
    paid_bars = re.findall(r'data-kind="paid" data-count="([0-9]+)"', page.text)
    assert len(paid_bars) == 60 and sum(map(int, paid_bars)) == 2
    latency = re.findall(r'class="bar p50"[^>]*data-measured="([0-9]+)"', page.text)
    assert len(latency) == 12 and sum(map(int, latency)) == 2
    assert '<svg id="throughput-chart"' in page.text and '<svg id="latency-chart"' in page.text


async def test_search_finds_by_each_indexed_field_and_pages_by_keyset(
    world: World, browser: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    payee, destination, reference = unique("payee-"), unique("acct_"), unique("ref-")
    sid = await accept(world, reference=reference, payee=payee, destination=destination)
    await world.dispatch(sid)
    rail_reference = await world.pool.fetchval(
        "SELECT rail_reference FROM settlements WHERE id = $1::uuid", sid
    )
    assert rail_reference
    for q in (sid, reference, payee, destination, rail_reference):
        found = await browser.get("/settlements", params={"q": q})
        assert row_ids(found, "settlement") == [sid], q
    none = await browser.get("/settlements", params={"q": reference[:-1]})  # exact only
    assert row_ids(none, "settlement") == [] and 'id="no-settlements"' in none.text

    same = sorted([await accept(world, payee=payee) for _ in range(4)] + [sid])
    monkeypatch.setattr(story_queries, "PAGE", 2)
    monkeypatch.setattr(settlements_page, "PAGE", 2)
    seen, path = [], f"/settlements?q={payee}"
    while path:
        page = await browser.get(path)
        seen += row_ids(page, "settlement")
        link = re.search(r'id="next-page" href="([^"]+)"', page.text)
        path = link.group(1).replace("&amp;", "&") if link else ""
    assert seen == same


async def test_a_settlements_page_tells_its_whole_story(
    world: World, browser: httpx.AsyncClient
) -> None:
    sid = await accept(world)
    await world.dispatch(sid)
    await world.move(sid, S.PAID)
    event = await plant_inbox(world.pool, "dead", sid)
    (break_id,) = await plant_breaks(world.pool, 1)
    await world.pool.execute(
        "UPDATE reconciliation_breaks SET settlement_id = $1::uuid WHERE id = $2", sid, break_id
    )
    csrf = await csrf_of(browser)
    await browser.post(
        "/breaks/resolve", data={"ids": str(break_id), "reason": "seen", "csrf": csrf}
    )
    await browser.post("/webhooks/replay", data={"ids": str(event), "csrf": csrf})
    key = await world.pool.fetchval(
        "SELECT idempotency_key FROM rail_instructions WHERE settlement_id = $1::uuid", sid
    )
    page = await browser.get(f"/settlements/{sid}")
    assert page.status_code == 200
    assert f'<dd id="settlement-id">{sid}</dd>' in page.text
    assert '<dd id="settlement-status">paid</dd>' in page.text
    assert f'<dd id="instruction-key">{key}</dd>' in page.text
    moves = await world.pool.fetch(
        "SELECT to_status FROM settlement_transitions WHERE settlement_id = $1::uuid "
        "ORDER BY sequence",
        sid,
    )
    shown = re.findall(r'class="transition" data-sequence="\d+" data-to="(\w+)"', page.text)
    assert shown == [m["to_status"] for m in moves] and shown[0] == "accepted"
    assert shown[-1] == "paid"
    postings = await world.pool.fetchval(
        "SELECT count(*) FROM journal_entries j JOIN postings p ON p.entry_id = j.id "
        "WHERE j.settlement_id = $1::uuid",
        sid,
    )
    assert postings > 0 and page.text.count('class="posting"') == postings
    assert row_ids(page, "inbox-event") == [str(event)]
    assert row_ids(page, "break") == [str(break_id)]
    actions = re.findall(r'class="action" data-id="\d+" data-action="([a-z.]+)"', page.text)
    assert sorted(actions) == ["break.resolve", "inbox.replay"]


async def test_markup_in_a_reference_is_shown_as_text(
    world: World, browser: httpx.AsyncClient
) -> None:
    reference = f'<script>alert("{unique()}")</script>'
    sid = await accept(world, reference=reference)
    found = await browser.get("/settlements", params={"q": reference})
    story = await browser.get(f"/settlements/{sid}")
    for page in (found, story):
        assert reference not in page.text
        assert "&lt;script&gt;alert(" in page.text
        assert "<script" not in page.text
    assert row_ids(found, "settlement") == [sid]


async def test_an_unknown_settlement_is_a_404_page(browser: httpx.AsyncClient) -> None:
    for path in (f"/settlements/{uuid.uuid4()}", "/settlements/not-an-id"):
        page = await browser.get(path)
        assert page.status_code == 404 and 'data-code="not_found"' in page.text


async def test_queues_list_what_waits_and_audit_filters_page_newest_first(
    world: World, browser: httpx.AsyncClient
) -> None:
    dead = [await plant_inbox(world.pool, "dead") for _ in range(2)]
    mismatch = await plant_inbox(world.pool, "mismatch")
    open_breaks = await plant_breaks(world.pool, 3)
    closed = await plant_breaks(world.pool, 1, status="resolved")
    assert row_ids(await browser.get("/webhooks"), "webhook") == [str(i) for i in dead]
    assert row_ids(await browser.get("/webhooks?status=mismatch"), "webhook") == [str(mismatch)]
    assert row_ids(await browser.get("/breaks"), "break") == [str(i) for i in open_breaks]
    assert row_ids(await browser.get("/breaks?status=resolved"), "break") == [str(closed[0])]
    bad = await browser.get("/webhooks?status=applied")
    assert bad.status_code == 400 and 'data-code="invalid_status"' in bad.text

    csrf = await csrf_of(browser)
    for item in open_breaks:
        await browser.post("/breaks/resolve", data={"ids": str(item), "reason": "r", "csrf": csrf})
    audit = await browser.get("/audit", params={"actor": "erin", "action": "break.resolve"})
    expected_targets = [f"break:{i}" for i in reversed(open_breaks)]
    assert re.findall(r'class="target mono">([^<]+)<', audit.text) == expected_targets
    one = await browser.get("/audit", params={"target": f"break:{open_breaks[0]}"})
    assert len(row_ids(one, "action")) == 1
    newest = int(row_ids(audit, "action")[0])
    older = await browser.get("/audit", params={"actor": "erin", "after": newest})
    assert re.findall(r'class="target mono">([^<]+)<', older.text) == expected_targets[1:]
    assert row_ids(await browser.get("/audit", params={"actor": "nobody"}), "action") == []


async def test_a_database_that_does_not_answer_is_shown_as_such_on_every_page(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    down = await asyncpg.create_pool("postgresql://settle@127.0.0.1:1/settle", min_size=0)
    try:
        console = console_of(world, rail, clock)
        async with client_of(replace(console, pool=down)) as client:
            pages = [
                await client.get(path, headers=bearer())
                for path in (
                    "/",
                    "/review",
                    "/breaks",
                    "/webhooks",
                    "/audit",
                    f"/settlements/{uuid.uuid4()}",
                    "/settlements?q=x",
                )
            ]
            wrong_method = await client.get("/review/resolve", headers=bearer())
    finally:
        await down.close()
    for page in pages:
        assert (page.status_code, error_code(page)) == (503, "store_unavailable"), page.url
        assert page.headers["Retry-After"]
    assert (wrong_method.status_code, error_code(wrong_method)) == (405, "method_not_allowed")
