"""Operators work on breaks on the real PostgreSQL: assigning, commenting and reopening are
audited and never wait for a second operator; a break reopens only when no other break of its
discrepancy is open; comments only grow; and the break list filters by type, age bucket,
currency and amount, showing each break's assignee and bucket, alike in `settle breaks list`,
the HTTP API and the console."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from services.domain.break_work import AgingBucket
from services.domain.break_work import BreakAction as A
from services.domain.breaks import BreakType
from services.operations.approval_policy import Policy
from services.operations.approvals import propose
from services.operations.breaks import BreakFilter, break_filter, list_breaks
from services.operations.desk import OperationsDesk
from services.operations.errors import OperationsError
from services.operations.http import routes
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from tests.integration.check_support import World, template
from tests.integration.console_support import browser, clock, csrf_of, error_code, outcomes
from tests.integration.operator_support import (
    new_id,
    operator_app,
    plant_break,
    rail,
    settle_as_operator,
    world,
)

pytestmark = pytest.mark.integration
__all__ = ["browser", "clock", "rail", "template", "world"]
TWO_PERSON = Policy(True, timedelta(days=1))
OPERATOR = "ops-token-1"


async def refused(work: Any) -> OperationsError:
    with pytest.raises(OperationsError) as raised:
        await work
    return raised.value


async def audit_of(world: World, break_id: int) -> list[tuple[str, str, Any]]:
    rows = await world.pool.fetch(
        "SELECT actor, action, before FROM operator_actions WHERE target = $1 ORDER BY id",
        f"break:{break_id}",
    )
    return [(r["actor"], r["action"], json.loads(r["before"])) for r in rows]


async def settle(world: World, *args: str) -> tuple[int, str]:
    return await settle_as_operator(world, *args)


async def test_assign_comment_and_reopen_are_audited_and_done_at_once_in_two_person_mode(
    world: World, rail: StripeLookup
) -> None:
    desk = OperationsDesk(world.pool, rail, TWO_PERSON)
    open_one = await plant_break(world.pool)
    resolved = await plant_break(world.pool, status="resolved")
    assigned = await desk.act(
        A.ASSIGN, str(open_one), {"assignee": "alice"}, reason=None, operator="bob"
    )
    assert not assigned.proposed and assigned.document["assignee"] == "alice"
    for text in ("asked the rail", "the rail says a fee"):
        noted = await desk.act(
            A.COMMENT, str(open_one), {"text": text}, reason=None, operator="bob"
        )
        assert not noted.proposed and noted.document["text"] == text
    reopened = await desk.act(A.REOPEN, str(resolved), {}, reason="came back", operator="bob")
    assert not reopened.proposed and reopened.document["status"] == "open"
    assert await audit_of(world, open_one) == [
        ("bob", "break.assign", {"assignee": None}),
        ("bob", "break.comment", {}),
        ("bob", "break.comment", {}),
    ]
    [(actor, action, before)] = await audit_of(world, resolved)
    assert (actor, action, before["status"], before["resolved_by"]) == (
        "bob",
        "break.reopen",
        "resolved",
        "reconciler",
    )
    row = await world.pool.fetchrow(
        "SELECT status, resolved_at, resolved_by, resolution_reason FROM reconciliation_breaks "
        "WHERE id = $1",
        resolved,
    )
    assert tuple(row) == ("open", None, None, None)
    texts = await world.pool.fetch(
        "SELECT author, body FROM reconciliation_break_comments WHERE break_id = $1 ORDER BY id",
        open_one,
    )
    assert [tuple(t) for t in texts] == [("bob", "asked the rail"), ("bob", "the rail says a fee")]
    with pytest.raises(asyncpg.PostgresError):
        await world.pool.execute("UPDATE reconciliation_break_comments SET body = 'rewritten'")
    with pytest.raises(asyncpg.PostgresError):
        await world.pool.execute("DELETE FROM reconciliation_break_comments")
    async with world.pool.acquire() as conn:
        never = propose(
            conn,
            A.COMMENT,
            str(open_one),
            {"text": "x"},
            reason=None,
            operator="bob",
            now=datetime.now(UTC),
        )
        assert (await refused(never)).code == "not_proposed"
    blank = await refused(
        desk.act(A.COMMENT, str(open_one), {"text": " "}, reason=None, operator="b")
    )
    assert (blank.status, blank.code) == (400, "invalid_text")


async def test_a_break_reopens_only_alone_resolved_and_with_a_reason(
    world: World, rail: StripeLookup
) -> None:
    desk = OperationsDesk(world.pool, rail, TWO_PERSON)
    key = f"key-{new_id()}"
    earlier = await plant_break(world.pool, status="resolved", key=key)
    later = await plant_break(world.pool, key=key)  # the same discrepancy, found again: open
    second = await refused(desk.act(A.REOPEN, str(earlier), {}, reason="again", operator="bob"))
    assert (second.status, second.code) == (409, "open_break_of_key")
    still_open = await refused(desk.act(A.REOPEN, str(later), {}, reason="x", operator="bob"))
    assert still_open.code == "not_resolved"
    no_reason = await refused(desk.act(A.REOPEN, str(earlier), {}, reason=" ", operator="bob"))
    assert no_reason.code == "reason_required"
    closed = await refused(
        desk.act(A.ASSIGN, str(earlier), {"assignee": "al"}, reason=None, operator="bob")
    )
    assert closed.code == "break_closed"
    assert await audit_of(world, earlier) == []


async def planted_ages(world: World) -> dict[str, int]:
    """Four breaks, one per age bucket, of two types and currencies and amounts."""
    now = datetime.now(UTC)
    return {
        "day": await plant_break(
            world.pool, expected=700, actual=500, first_seen=now - timedelta(hours=2)
        ),
        "week": await plant_break(
            world.pool,
            "balance_mismatch",
            field="balance",
            currency="USD",
            expected=1000,
            actual=6000,
            first_seen=now - timedelta(days=3),
        ),
        "month": await plant_break(
            world.pool,
            "missing_at_rail",
            settlement_id=new_id(),
            field="count",
            expected=1,
            actual=0,
            first_seen=now - timedelta(days=10),
        ),
        "older": await plant_break(
            world.pool, expected=700, actual=750, first_seen=now - timedelta(days=40)
        ),
    }


async def test_the_list_filters_by_type_age_currency_and_amount(world: World) -> None:
    ids = await planted_ages(world)

    async def listed(where: BreakFilter) -> list[int]:
        found = await list_breaks(world.pool, where, now=datetime.now(UTC))
        return [view.item.id for view in found]

    for bucket, name in zip(AgingBucket, ("day", "week", "month", "older"), strict=True):
        assert await listed(break_filter(bucket=bucket)) == [ids[name]]
    assert await listed(break_filter(break_type=BreakType.AMOUNT_MISMATCH)) == [
        ids["day"],
        ids["older"],
    ]
    assert await listed(break_filter(currency="EUR")) == [ids["day"], ids["month"], ids["older"]]
    # By the absolute difference: 200, 5000 and 50; a missing object has none.
    assert await listed(break_filter(min_amount=100)) == [ids["day"], ids["week"]]
    assert await listed(break_filter(max_amount=100)) == [ids["older"]]
    assert await listed(break_filter(min_amount=200, max_amount=200)) == [ids["day"]]
    for wrong, code in (
        ({"currency": "eur"}, "invalid_currency"),
        ({"min_amount": 5, "max_amount": 1}, "invalid_amount_range"),
    ):
        with pytest.raises(OperationsError) as raised:
            break_filter(**wrong)
        assert raised.value.code == code


def http_of(world: World, rail: StripeLookup) -> httpx.AsyncClient:
    app = operator_app(routes(world.pool, rail, BearerAuth({OPERATOR: "erin"})))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://ops")


async def test_http_lists_with_filters_and_works_on_a_break(
    world: World, rail: StripeLookup
) -> None:
    ids = await planted_ages(world)
    auth = {"Authorization": f"Bearer {OPERATOR}"}
    async with http_of(world, rail) as client:
        assigned = await client.post(
            f"/v1/breaks/{ids['day']}/assign", headers=auth, json={"assignee": "alice"}
        )
        noted = await client.post(
            f"/v1/breaks/{ids['day']}/comment", headers=auth, json={"text": "fee?"}
        )
        week = await client.get("/v1/breaks", headers=auth, params={"bucket": "1-7d"})
        eur = await client.get(
            "/v1/breaks", headers=auth, params={"currency": "EUR", "min_amount": "100"}
        )
        shown = await client.get(f"/v1/breaks/{ids['day']}", headers=auth)
        unknown = await client.post(
            f"/v1/breaks/{ids['week']}/adjust",
            headers=auth,
            json={
                "account": "petty_cash",
                "direction": "debit",
                "amount": 5,
                "currency": "USD",
                "reason": "r",
            },
        )
        nothing = await client.post(f"/v1/breaks/{ids['week']}/launder", headers=auth, json={})
        bad = [
            await client.get("/v1/breaks", headers=auth, params=params)
            for params in ({"bucket": "2d"}, {"currency": "eu"}, {"min_amount": "-1"})
        ]
    assert (assigned.status_code, noted.status_code) == (200, 200)
    assert [(b["id"], b["age_bucket"]) for b in week.json()["data"]] == [(ids["week"], "1-7d")]
    [day] = eur.json()["data"]
    assert (day["id"], day["assignee"], day["difference"], day["age_bucket"]) == (
        ids["day"],
        "alice",
        -200,
        "0-1d",
    )
    assert [c["text"] for c in shown.json()["comments"]] == ["fee?"]
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (400, "unknown_account")
    assert nothing.status_code == 404
    assert [(r.status_code, r.json()["error"]["code"]) for r in bad] == [
        (400, "invalid_bucket"),
        (400, "invalid_currency"),
        (400, "invalid_min_amount"),
    ]


async def test_settle_breaks_lists_by_bucket_and_works_on_a_break(world: World) -> None:
    ids = await planted_ages(world)
    status, out = await settle(
        world, "breaks", "assign", str(ids["older"]), "--to", "dave", "--operator", "carol"
    )
    assert status == 0, out
    status, out = await settle(world, "breaks", "list", "--bucket", "30d+", "--json")
    assert status == 0, out
    [older] = json.loads(out)["data"]
    assert (older["id"], older["assignee"], older["age_bucket"]) == (ids["older"], "dave", "30d+")
    status, out = await settle(world, "breaks", "list", "--currency", "USD")
    assert status == 0 and re.search(rf"^{ids['week']} .*age=1-7d  assignee=-", out, re.M), out
    status, out = await settle(
        world,
        "breaks",
        "adjust",
        str(ids["week"]),
        "--account",
        "petty_cash",
        "--direction",
        "debit",
        "--amount",
        "5",
        "--currency",
        "USD",
        "--reason",
        "r",
        "--operator",
        "carol",
        "--json",
    )
    assert (status, json.loads(out)["error"]["code"]) == (1, "unknown_account")
    status, out = await settle(
        world,
        "breaks",
        "write-off",
        str(ids["week"]),
        "--reason",
        "lost",
        "--operator",
        "carol",
        "--json",
    )
    assert status == 0, out
    assert json.loads(out)["break"]["resolution_kind"] == "write_off"


async def test_the_console_filters_shows_assignee_and_age_and_works_on_breaks(
    world: World, browser: httpx.AsyncClient
) -> None:
    ids = await planted_ages(world)
    csrf = await csrf_of(browser, "/breaks")
    page = await browser.post(
        "/breaks/assign", data={"ids": str(ids["month"]), "assignee": "dave", "csrf": csrf}
    )
    assert outcomes(page) == {str(ids["month"]): ("done", "")}
    month = await browser.get("/breaks", params={"bucket": "7-30d"})
    rows = re.findall(
        r'<tr class="break" data-id="(\d+)" data-status="open" data-bucket="([^"]+)" '
        r'data-assignee="([^"]*)"',
        month.text,
    )
    assert rows == [(str(ids["month"]), "7-30d", "dave")]
    usd = await browser.get("/breaks", params={"currency": "USD", "min_amount": "1000"})
    assert re.findall(r'<tr class="break" data-id="(\d+)"', usd.text) == [str(ids["week"])]
    written = await browser.post(
        "/breaks/write_off",
        data={"ids": [str(ids["day"]), str(ids["month"])], "reason": "fee", "csrf": csrf},
    )
    assert outcomes(written) == {
        str(ids["day"]): ("done", ""),
        str(ids["month"]): ("refused", "no_amount"),
    }
    wrong = await browser.post(
        "/breaks/adjust",
        data={
            "ids": str(ids["week"]),
            "account": "petty_cash",
            "direction": "debit",
            "amount": "5",
            "currency": "USD",
            "reason": "r",
            "csrf": csrf,
        },
    )
    assert (wrong.status_code, error_code(wrong)) == (400, "unknown_account")
