"""An operator's round through the console in a real Chromium: sign in through the form (a
wrong token is refused), find a settlement and read its page, resolve review items where the
rail agrees (and see the one it contradicts refused), replay a dead webhook, resolve a break,
find the actions in the audit, read the overview, sign out; a forged POST from another origin
is refused. What each page shows is checked against the database, and each page is saved as
<page>.png (tests/browser/chromium.py: SCREENSHOTS; docs/console holds the manual's).

One browser and one console serve the whole module (a Chromium costs about a second to start);
the tests run in order as one operator's session, and each signs in itself when run alone."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from services.console.auth import LOCAL_COOKIE as SESSION_COOKIE
from services.operations.audit import record_action
from tests.browser.chromium import follow, screenshot, submit, text_of
from tests.browser.console_pages import (
    OPERATOR,
    error_code,
    forge_post,
    outcomes,
    sign_in,
    signed_in,
    tick,
    visit,
)
from tests.browser.console_support import OPERATORS, Console, browser, console
from tests.integration.operator_support import made_at_rail, plant_breaks, referred, snapshot
from tests.integration.test_check_findings import store_webhook

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]
__all__ = ["browser", "console", "signed_in"]


def digits(text: str) -> str:
    # An amount is shown as 700 or as 7.00: its digits are the minor units either way.
    return re.sub(r"\D", "", text)


async def test_a_wrong_token_is_refused_and_the_right_one_signs_in(
    browser: WebDriver, console: Console
) -> None:
    assert visit(browser, console, "/") == "login"  # nothing is shown before signing in
    screenshot(browser, "login")
    assert sign_in(browser, console, "ops-not-a-token") == "login"
    assert error_code(browser) == "sign_in_failed"
    assert "ops-not-a-token" not in browser.page_source
    assert browser.get_cookie(SESSION_COOKIE) is None
    assert sign_in(browser, console, OPERATORS[OPERATOR]) == "overview"
    assert text_of(browser, "#operator") == OPERATOR
    session = browser.get_cookie(SESSION_COOKIE)
    assert session is not None and session["httpOnly"] and session["sameSite"] == "Strict"


async def test_search_finds_a_settlement_whose_page_matches_its_row(
    signed_in: WebDriver, console: Console
) -> None:
    sid = await console.paid_at_rail()
    row = await console.pool.fetchrow(
        "SELECT s.status, s.amount, s.currency, s.reference, s.rail_reference, "
        "r.idempotency_key, r.attempts FROM settlements s "
        "JOIN rail_instructions r ON r.settlement_id = s.id WHERE s.id = $1::uuid",
        sid,
    )
    assert row["rail_reference"]
    visit(signed_in, console, "/settlements")
    signed_in.find_element(By.ID, "q").send_keys(row["rail_reference"])
    assert submit(signed_in, "search") == "settlements"
    [found] = signed_in.find_elements(By.CSS_SELECTOR, "#settlements tr.settlement")
    assert found.get_attribute("data-id") == sid
    assert found.find_element(By.CSS_SELECTOR, "td.reference").text == row["reference"]
    assert follow(signed_in, found.find_element(By.CSS_SELECTOR, "a.settlement-link")) == (
        "settlement"
    )
    assert text_of(signed_in, "#settlement-id") == sid
    assert text_of(signed_in, "#settlement-status") == row["status"] == "paid"
    amount = text_of(signed_in, "#settlement-amount")
    assert digits(amount) == str(row["amount"]) and row["currency"] in amount
    assert text_of(signed_in, "#settlement-rail-reference") == row["rail_reference"]
    assert text_of(signed_in, "#instruction-key") == row["idempotency_key"]
    moves = signed_in.find_elements(By.CSS_SELECTOR, "#transitions tr.transition")
    assert len(moves) == await console.pool.fetchval(
        "SELECT count(*) FROM settlement_transitions WHERE settlement_id = $1::uuid", sid
    )
    screenshot(signed_in, "settlement")


async def test_markup_in_a_settlement_is_shown_as_text_and_never_run(
    signed_in: WebDriver, console: Console
) -> None:
    payee = f"<img src=x onerror=\"document.title='ran'\"> {uuid.uuid4().hex[:8]}"
    sid = await console.world.accept(payee=payee)
    visit(signed_in, console, "/settlements")
    signed_in.find_element(By.ID, "q").send_keys(payee)
    assert submit(signed_in, "search") == "settlements"
    [found] = signed_in.find_elements(By.CSS_SELECTOR, "#settlements tr.settlement")
    assert found.get_attribute("data-id") == sid
    assert found.find_element(By.CSS_SELECTOR, "td.payee").text == payee
    assert signed_in.find_elements(By.CSS_SELECTOR, "img") == []
    assert signed_in.title != "ran"


async def test_review_resolves_where_the_rail_agrees_and_refuses_where_it_does_not(
    signed_in: WebDriver, console: Console
) -> None:
    world = console.world
    confirmed, contradicted, nothing_made = [await referred(world) for _ in range(3)]
    await made_at_rail(world, confirmed)
    await made_at_rail(world, contradicted, amount=699)  # not the 700 it asked for
    untouched = await snapshot(world, contradicted)
    assert visit(signed_in, console, "/review") == "review"
    listed = signed_in.find_elements(By.CSS_SELECTOR, "#review-queue tr.review-item")
    assert {r.get_attribute("data-id") for r in listed} >= {
        confirmed,
        contradicted,
        nothing_made,
    }

    tick(signed_in, confirmed, contradicted)
    Select(signed_in.find_element(By.ID, "as")).select_by_value("paid")
    signed_in.find_element(By.ID, "reason").send_keys("transfer seen at the rail")
    assert submit(signed_in, "resolve") == "review"
    assert outcomes(signed_in) == {
        confirmed: ("done", None),
        contradicted: ("refused", "rail_disagrees"),
    }
    refusal = signed_in.find_element(By.CSS_SELECTOR, f'tr.outcome[data-id="{contradicted}"]')
    assert "699" in refusal.find_element(By.CSS_SELECTOR, "td.message").text  # and why
    screenshot(signed_in, "review")  # the queue with each item's outcome
    paid = await snapshot(world, confirmed)
    assert (paid["status"], paid["instruction"]) == ("paid", "transferred")
    assert paid["rail_reference"]
    [audit] = paid["actions"]
    assert (audit["actor"], audit["action"]) == (OPERATOR, "review.resolve")
    assert audit["detail"]["as"] == "paid"
    assert audit["detail"]["reason"] == "transfer seen at the rail"
    assert await snapshot(world, contradicted) == untouched

    visit(signed_in, console, "/review")
    tick(signed_in, nothing_made)
    Select(signed_in.find_element(By.ID, "as")).select_by_value("failed")
    signed_in.find_element(By.ID, "reason").send_keys("nothing at the rail")
    assert submit(signed_in, "resolve") == "review"
    assert outcomes(signed_in) == {nothing_made: ("done", None)}
    failed = await snapshot(world, nothing_made)
    assert failed["status"] == "failed"
    assert [(a["actor"], a["detail"]["as"]) for a in failed["actions"]] == [(OPERATOR, "failed")]


async def test_a_dead_webhook_replayed_is_received_again_and_audited(
    signed_in: WebDriver, console: Console
) -> None:
    event = await store_webhook(console.world, "dead", "no settlement for tr_lost", 60)
    row_id = await console.pool.fetchval(
        "SELECT id FROM inbox_events WHERE rail_event_id = $1", event
    )
    assert visit(signed_in, console, "/webhooks?status=dead") == "webhooks"
    [shown] = signed_in.find_elements(By.CSS_SELECTOR, f'#webhooks tr.webhook[data-id="{row_id}"]')
    assert shown.find_element(By.CSS_SELECTOR, "td.status").text == "dead"
    assert shown.find_element(By.CSS_SELECTOR, "td.reason").text == "no settlement for tr_lost"
    screenshot(signed_in, "webhooks")

    tick(signed_in, row_id)
    assert submit(signed_in, "replay") == "webhooks"
    assert outcomes(signed_in) == {str(row_id): ("done", None)}
    row = await console.pool.fetchrow(
        "SELECT status, attempts, reason FROM inbox_events WHERE id = $1", row_id
    )
    assert dict(row) == {"status": "received", "attempts": 0, "reason": None}
    [audit] = await console.pool.fetch(
        "SELECT actor, action, detail FROM operator_actions WHERE target = $1", str(row_id)
    )
    assert (audit["actor"], audit["action"]) == (OPERATOR, "inbox.replay")
    assert json.loads(audit["detail"])["from_status"] == "dead"


async def test_a_break_resolved_on_its_page_is_closed_and_audited(
    signed_in: WebDriver, console: Console
) -> None:
    resolved, left = await plant_breaks(console.pool, 2, "amount_mismatch")
    assert visit(signed_in, console, "/breaks?status=open") == "breaks"
    rows = {
        r.get_attribute("data-id"): r
        for r in signed_in.find_elements(By.CSS_SELECTOR, "#breaks tr.break")
    }
    for break_id in (resolved, left):
        shown = rows[str(break_id)]
        assert shown.find_element(By.CSS_SELECTOR, "td.type").text == "amount_mismatch"
        assert shown.find_element(By.CSS_SELECTOR, "td.status").text == "open"
    screenshot(signed_in, "breaks")

    tick(signed_in, resolved)
    signed_in.find_element(By.ID, "reason").send_keys("fee taken by the rail, booked by hand")
    assert submit(signed_in, "resolve") == "breaks"
    assert outcomes(signed_in) == {str(resolved): ("done", None)}
    rows = await console.pool.fetch(
        "SELECT id, status, resolved_by, resolution_reason FROM reconciliation_breaks "
        "WHERE id = ANY($1::bigint[]) ORDER BY id",
        [resolved, left],
    )
    assert [tuple(r) for r in rows] == [
        (resolved, "resolved", OPERATOR, "fee taken by the rail, booked by hand"),
        (left, "open", None, None),
    ]
    [audit] = await console.pool.fetch(
        "SELECT actor, action FROM operator_actions WHERE target = $1", f"break:{resolved}"
    )
    assert tuple(audit) == (OPERATOR, "break.resolve")


async def test_posts_forged_on_another_origin_are_refused(
    signed_in: WebDriver, console: Console
) -> None:
    world = console.world
    sid = await referred(world)
    await made_at_rail(world, sid)  # the rail agrees: only the missing token can refuse it
    before = await snapshot(world, sid)
    # The rail simulator's origin is another port on the same host: the same site, so the
    # browser sends the console's cookies along and only the form's token tells a forgery.
    forged = {"ids": sid, "as": "paid", "reason": "forged"}
    assert forge_post(signed_in, world.sim_url, f"{console.url}/review/resolve", forged) == (
        "error"
    )
    assert error_code(signed_in) == "csrf_missing"
    assert await snapshot(world, sid) == before
    # Nor can another page sign this browser in as someone else.
    forged = {"token": OPERATORS["bob"]}
    assert forge_post(signed_in, world.sim_url, f"{console.url}/login", forged) == "login"
    assert error_code(signed_in) == "csrf_missing"
    assert visit(signed_in, console, "/") == "overview"
    assert text_of(signed_in, "#operator") == OPERATOR


async def test_the_audit_page_shows_one_operators_actions_as_stored(
    signed_in: WebDriver, console: Console
) -> None:
    # The whole trail first, as an operator opens it: the module's resolutions and replay.
    assert visit(signed_in, console, "/audit") == "audit"
    screenshot(signed_in, "audit")
    target = f"settlement:{uuid.uuid4()}"
    async with console.pool.acquire() as conn:
        for actor in (OPERATOR, "bob", OPERATOR):
            await record_action(
                conn,
                actor=actor,
                action="review.resolve",
                target=target,
                detail={"as": "failed", "reason": "planted"},
                before={},
                after={},
                now=datetime.now(UTC),
            )
    assert visit(signed_in, console, f"/audit?actor={OPERATOR}&target={target}") == "audit"
    shown = [
        (
            r.get_attribute("data-id"),
            r.find_element(By.CSS_SELECTOR, "td.actor").text,
            r.find_element(By.CSS_SELECTOR, "td.action-name").text,
            r.find_element(By.CSS_SELECTOR, "td.target").text,
        )
        for r in signed_in.find_elements(By.CSS_SELECTOR, "#audit tr.action")
    ]
    stored = await console.pool.fetch(
        "SELECT id, actor, action, target FROM operator_actions WHERE actor = $1 AND target = $2",
        OPERATOR,
        target,
    )
    assert len(stored) == 2
    assert sorted(shown) == sorted(
        (str(a["id"]), a["actor"], a["action"], a["target"]) for a in stored
    )


async def test_the_overview_counts_what_the_database_holds(
    signed_in: WebDriver, console: Console
) -> None:
    for _ in range(2):  # a figure for paid and for needs_review, whichever tests ran before
        await console.paid_at_rail()
        await referred(console.world)
    await store_webhook(console.world, "dead", "no settlement for tr_lost", 60)
    await plant_breaks(console.pool, 1, "amount_mismatch")
    # Per-status figures are the planner's statistics: on a table this small ANALYZE reads
    # every row, so each figure shown is the exact count; a status held by one row only is
    # left out of the statistics' common values, and shown as "few".
    await console.pool.execute("ANALYZE settlements")
    assert visit(signed_in, console, "/") == "overview"
    stored = dict(
        await console.pool.fetch("SELECT status, count(*) FROM settlements GROUP BY status")
    )
    shown = {
        status: signed_in.find_element(By.CSS_SELECTOR, f"#state-{status} td.count").get_attribute(
            "data-count"
        )
        for status in stored
    }
    for status, n in stored.items():
        assert shown[status] in ({str(n)} if n > 1 else {str(n), ""}), status
    dead = await console.pool.fetchval("SELECT count(*) FROM inbox_events WHERE status = 'dead'")
    assert text_of(signed_in, "#inbox-dead") == str(dead)
    open_amounts = await console.pool.fetchval(
        "SELECT count(*) FROM reconciliation_breaks "
        "WHERE status = 'open' AND break_type = 'amount_mismatch'"
    )
    assert text_of(signed_in, "#breaks-open-amount_mismatch td.count") == str(open_amounts)
    screenshot(signed_in, "overview")


async def test_signing_out_ends_the_session(signed_in: WebDriver, console: Console) -> None:
    sessions = "SELECT count(*) FROM console_sessions"
    before = await console.pool.fetchval(sessions)
    assert submit(signed_in, "logout") == "login"
    assert await console.pool.fetchval(sessions) == before - 1
    assert signed_in.get_cookie(SESSION_COOKIE) is None
    assert visit(signed_in, console, "/review") == "login"
