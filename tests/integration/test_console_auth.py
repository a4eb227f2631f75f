"""Signing in to the console on the real PostgreSQL: a form trades an operator token for a
session cookie whose id is stored only as a hash; a refused sign-in answers the same whatever
was wrong and never shows the token; sessions end when idle and at logout; a POST without
its session's form token is refused with a code; a bearer operator token works on every page
and action without cookie or form token, and a tenant's token is refused."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from services.console.auth import Gate
from services.console.sessions import SessionStore
from services.console.web import Console
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from tests.integration.check_support import World, template
from tests.integration.console_support import (
    ERIN,
    FRANK,
    TENANT_TOKEN,
    Clock,
    bearer,
    browser,
    client_of,
    clock,
    console_of,
    csrf_of,
    error_code,
    sign_in,
)
from tests.integration.operator_support import plant_breaks, rail, world

pytestmark = pytest.mark.integration
__all__ = ["browser", "clock", "rail", "template", "world"]
PAGES = ["/", "/settlements?q=x", "/review", "/breaks", "/webhooks", "/audit", "/approvals"]


async def test_signing_in_sets_a_strict_http_only_cookie_whose_id_is_stored_hashed(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        form = await client.get("/login")
        signed = await sign_in(client, ERIN, "/review")
        page = await client.get("/")
    assert 'id="login-form"' in form.text and 'name="token"' in form.text
    login_cookie = form.headers["set-cookie"]
    assert login_cookie.startswith("settle_console_login=") and "HttpOnly" in login_cookie
    assert (signed.status_code, signed.headers["location"]) == (303, "/review")
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith("settle_console=") and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie and "Path=/" in cookie
    session_id = cookie.split(";")[0].split("=", 1)[1]
    stored = await world.pool.fetch("SELECT id_hash, operator FROM console_sessions")
    assert [(r["id_hash"], r["operator"]) for r in stored] == [
        (hashlib.sha256(session_id.encode()).digest(), "erin")
    ]
    assert page.status_code == 200 and '<span id="operator">erin</span>' in page.text


async def test_in_production_the_cookie_is_secure_and_host_prefixed(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async with client_of(console_of(world, rail, clock, secure=True), "https://console") as client:
        form = await client.get("/login")
        signed = await sign_in(client, ERIN)
        page = await client.get("/")
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith("__Host-settle_console=") and "Secure" in cookie
    assert form.headers["set-cookie"].startswith("__Host-settle_console_login=")
    assert page.status_code == 200


@pytest.mark.parametrize("token", ["not-a-token", TENANT_TOKEN, "", ERIN + "x"])
async def test_a_refused_sign_in_answers_the_same_whatever_was_wrong(
    world: World, rail: StripeLookup, clock: Clock, token: str
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        refused = await sign_in(client, token)
        after = await client.get("/")
    assert refused.status_code == 401 and error_code(refused) == "sign_in_failed"
    assert "sign-in failed: check the operator token and try again" in refused.text
    assert "settle_console=" not in refused.headers.get("set-cookie", "")  # no session
    assert token == "" or token not in refused.text
    assert after.status_code == 303 and after.headers["location"] == "/login?next=/"
    assert await world.pool.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_a_sign_in_without_its_form_token_is_refused_and_signs_nobody_in(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        no_cookie = await client.post("/login", data={"token": ERIN, "csrf": "0" * 64})
        await client.get("/login")  # the browser now holds the form's cookie
        no_field = await client.post("/login", data={"token": ERIN})
        wrong = await client.post("/login", data={"token": ERIN, "csrf": "0" * 64})
    assert (no_cookie.status_code, error_code(no_cookie)) == (403, "csrf_missing")
    assert (no_field.status_code, error_code(no_field)) == (403, "csrf_missing")
    assert (wrong.status_code, error_code(wrong)) == (403, "csrf_invalid")
    assert all('id="login-form"' in page.text for page in (no_cookie, no_field, wrong))
    assert await world.pool.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_a_session_ends_after_eight_idle_hours_and_at_logout(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        await sign_in(client, ERIN)
        clock.advance(hours=7, minutes=59)
        assert (await client.get("/audit")).status_code == 200  # used: idle time starts again
        clock.advance(hours=7, minutes=59)
        assert (await client.get("/audit")).status_code == 200
        clock.advance(hours=8, minutes=1)
        idle = await client.get("/audit")
        assert (idle.status_code, idle.headers["location"]) == (303, "/login?next=/audit")

        await sign_in(client, ERIN)
        for _ in range(3):  # used every seven hours, a session still ends after a day
            clock.advance(hours=7)
            assert (await client.get("/audit")).status_code == 200
        clock.advance(hours=3, minutes=1)
        assert (await client.get("/audit")).status_code == 303

        await sign_in(client, ERIN)
        cookies = dict(client.cookies)
        out = await client.post("/logout", data={"csrf": await csrf_of(client)})
        assert (out.status_code, out.headers["location"]) == (303, "/login")
        client.cookies.update(cookies)  # the old cookie, kept by someone: no longer a session
        assert (await client.get("/")).status_code == 303
    assert await world.pool.fetchval("SELECT count(*) FROM console_sessions") == 0


async def test_a_session_ends_once_its_operators_token_is_taken_out(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        await sign_in(client, FRANK)
        assert (await client.get("/audit")).status_code == 200
        # The console restarted without frank's token: his cookie no longer signs him in.
        gate = Gate(
            BearerAuth({ERIN: "erin"}),
            BearerAuth({TENANT_TOKEN: "acme"}),
            SessionStore(world.pool, clock),
            secure=False,
        )
        revoked = replace(console_of(world, rail, clock), gate=gate)
        async with client_of(revoked) as after:
            after.cookies.update(dict(client.cookies))
            assert (await after.get("/audit")).status_code == 303


def rotated(world: World, rail: StripeLookup, clock: Clock, tokens: dict[str, str]) -> Console:
    """The console restarted with `tokens` as its operators' tokens."""
    gate = Gate(
        BearerAuth(tokens),
        BearerAuth({TENANT_TOKEN: "acme"}),
        SessionStore(world.pool, clock),
        secure=False,
    )
    return replace(console_of(world, rail, clock), gate=gate)


async def test_a_session_ends_once_the_token_it_was_opened_with_is_rotated(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    new_token = "erin-operator-token-rotated-9876543210"
    async with client_of(console_of(world, rail, clock)) as client:
        await sign_in(client, ERIN)
        assert (await client.get("/audit")).status_code == 200
        opened = dict(client.cookies)
    [stored] = await world.pool.fetch("SELECT token_digest FROM console_sessions")
    assert stored["token_digest"] == hashlib.sha256(ERIN.encode()).digest()

    # erin still holds a token, but not the one this session was opened with.
    after = rotated(world, rail, clock, {new_token: "erin", FRANK: "frank"})
    async with client_of(after) as browser_after:
        browser_after.cookies.update(opened)
        old = await browser_after.get("/audit")
        assert (old.status_code, old.headers["location"]) == (303, "/login?next=/audit")
        refused = await browser_after.post("/logout", data={"csrf": "0" * 64})
        assert (refused.status_code, error_code(refused)) == (401, "unauthorized")
        await sign_in(browser_after, new_token)
        page = await browser_after.get("/")
        assert page.status_code == 200 and '<span id="operator">erin</span>' in page.text
    # A session kept from before digests were kept has none: refused too.
    async with client_of(after) as client:
        await sign_in(client, new_token)
        await world.pool.execute("UPDATE console_sessions SET token_digest = NULL")
        assert (await client.get("/audit")).status_code == 303


async def test_an_oversize_sign_in_is_refused_413_before_it_is_read(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):
            yield b"token=" + b"A" * 1024 + b"&"

    async with client_of(console_of(world, rail, clock)) as client:
        await client.get("/login")
        declared = await client.post("/login", data={"token": ERIN, "next": "/" + "x" * 5000})
        streamed = await client.post(
            "/login",
            content=chunks(),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        fits = await sign_in(client, ERIN)
    for refused in (declared, streamed):
        assert (refused.status_code, error_code(refused)) == (413, "body_too_large")
        assert "settle_console=" not in refused.headers.get("set-cookie", "")
    assert fits.status_code == 303
    assert await world.pool.fetchval("SELECT count(*) FROM console_sessions") == 1


async def test_a_post_without_its_form_token_is_refused_with_a_code_and_changes_nothing(
    world: World, browser: httpx.AsyncClient
) -> None:
    (open_break,) = await plant_breaks(world.pool, 1)
    form = {"ids": str(open_break), "reason": "written off"}
    missing = await browser.post("/breaks/resolve", data=form)
    wrong = await browser.post("/breaks/resolve", data={**form, "csrf": "0" * 64})
    logout = await browser.post("/logout")
    assert (missing.status_code, error_code(missing)) == (403, "csrf_missing")
    assert (wrong.status_code, error_code(wrong)) == (403, "csrf_invalid")
    assert (logout.status_code, error_code(logout)) == (403, "csrf_missing")
    status = await world.pool.fetchval(
        "SELECT status FROM reconciliation_breaks WHERE id = $1", open_break
    )
    assert status == "open"
    assert (await browser.get("/")).status_code == 200  # still signed in


async def test_an_operator_bearer_token_opens_every_page_and_acts_without_a_form_token(
    world: World, rail: StripeLookup, clock: Clock
) -> None:
    (open_break,) = await plant_breaks(world.pool, 1)
    async with client_of(console_of(world, rail, clock)) as client:
        pages = [await client.get(path, headers=bearer()) for path in PAGES]
        done = await client.post(
            "/breaks/resolve",
            data={"ids": str(open_break), "reason": "by script"},
            headers=bearer(),
        )
    assert [p.status_code for p in pages] == [200] * len(PAGES)
    assert all('<span id="operator">erin</span>' in p.text for p in pages)
    assert 'id="logout-form"' not in pages[0].text and 'name="csrf"' not in pages[3].text
    assert done.status_code == 200 and "set-cookie" not in done.headers
    actor = await world.pool.fetchval(
        "SELECT actor FROM operator_actions WHERE target = $1", f"break:{open_break}"
    )
    assert actor == "erin"


@pytest.mark.parametrize("path", PAGES)
async def test_a_tenant_token_is_forbidden_and_an_unknown_one_unauthorized(
    world: World, rail: StripeLookup, clock: Clock, path: str
) -> None:
    async with client_of(console_of(world, rail, clock)) as client:
        tenant = await client.get(path, headers=bearer(TENANT_TOKEN))
        unknown = await client.get(path, headers=bearer("nope"))
        action = await client.post("/review/resolve", headers=bearer(TENANT_TOKEN))
    assert (tenant.status_code, error_code(tenant)) == (403, "forbidden")
    assert (unknown.status_code, error_code(unknown)) == (401, "unauthorized")
    assert (action.status_code, error_code(action)) == (403, "forbidden")
    assert TENANT_TOKEN not in tenant.text
