"""The webhook endpoint on the real PostgreSQL: signature first, store first, dedupe by event
id and by change, bodies refused or kept as rejected, and the operator view with replay."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from services.inbox.kept_body import kept
from services.inbox.worker import InboxWorker
from tests.integration.inbox_support import (
    OPERATOR_TOKEN,
    SECRET,
    Inbox,
    event_id,
    inbox_rows,
    moves,
    pool,
    rail_event,
    settlement,
    status_of,
)

pytestmark = pytest.mark.integration
__all__ = ["pool"]


def counter(inbox: Inbox, name: str, **labels: str) -> float:
    value = inbox.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def stored_payloads(pool: asyncpg.Pool, body: bytes) -> list[asyncpg.Record]:
    stored = kept(body)  # the body as the inbox keeps it
    return await pool.fetch("SELECT status, reason FROM inbox_events WHERE payload = $1", stored)


@pytest.mark.parametrize(
    ("secret", "age", "header", "code"),
    [
        ("whsec_someone_else", 0, None, "invalid_signature"),
        (SECRET, 400, None, "stale_signature"),
        (SECRET, 0, "", "missing_signature"),
        (SECRET, 0, "t=1,v1=deadbeef", "invalid_signature"),
    ],
)
async def test_a_bad_missing_or_stale_signature_is_refused_and_nothing_stored(
    pool: asyncpg.Pool, secret: str, age: float, header: str | None, code: str
) -> None:
    inbox = Inbox(pool)
    body = rail_event("transfer.created", "tr_sig", str(uuid.uuid4()))
    response = await inbox.post(body, secret, age, header)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert await inbox_rows(pool, event_id(body)) == []
    assert counter(inbox, "settle_inbox_bad_signatures_total", reason=code) == 1


async def test_during_a_rotation_both_secrets_are_accepted(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool, secrets=("whsec_new", "whsec_old"))
    for secret in ("whsec_new", "whsec_old"):
        body = rail_event("transfer.created", f"tr_{secret}", str(uuid.uuid4()))
        assert (await inbox.post(body, secret)).status_code == 200
        assert len(await inbox_rows(pool, event_id(body))) == 1
    retired = rail_event("transfer.created", "tr_retired", str(uuid.uuid4()))
    assert (await inbox.post(retired, SECRET)).status_code == 400


async def test_a_body_over_the_limit_is_413_and_not_stored(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool, max_body=2048)
    body = rail_event("transfer.created", "tr_" + "x" * 3000, str(uuid.uuid4()))
    response = await inbox.post(body)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
    assert await inbox_rows(pool, event_id(body)) == []


async def test_signed_malformed_json_is_400_and_stored_rejected_with_the_reason(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    body = b'{"id": "evt_broken", "type": "transfer.created", ' + uuid.uuid4().hex.encode()
    response = await inbox.post(body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_event"
    [row] = await stored_payloads(pool, body)
    assert row["status"] == "rejected" and "not JSON" in row["reason"]


async def test_a_duplicate_delivery_answers_200_and_does_nothing(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_dup1")
    body = rail_event("transfer.created", "tr_dup1", sid)
    first, second = await inbox.post(body), await inbox.post(body)
    assert (first.status_code, second.status_code) == (200, 200)
    assert (first.json()["duplicate"], second.json()["duplicate"]) == (False, True)
    await inbox.worker.drain()
    await inbox.deliver(body)
    assert len(await inbox_rows(pool, event_id(body))) == 1
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "paid"]
    assert counter(inbox, "settle_inbox_duplicates_total") == 2
    assert counter(inbox, "settle_inbox_applied_total", event_type="transfer.created") == 1


async def test_two_event_ids_for_one_change_are_stored_once(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_twin1")
    body, twin = (rail_event("transfer.created", "tr_twin1", sid) for _ in range(2))
    assert event_id(body) != event_id(twin)
    await inbox.deliver(body, twin)
    assert len(await inbox_rows(pool, event_id(body))) == 1
    assert await inbox_rows(pool, event_id(twin)) == []
    assert (await moves(pool, sid)).count("paid") == 1


@pytest.mark.parametrize(
    ("type_", "why"),
    [("charge.succeeded", "unknown event type"), ("payout.created", "informational")],
)
async def test_unknown_and_informational_types_are_ignored_with_a_reason(
    pool: asyncpg.Pool, type_: str, why: str
) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING)
    body = rail_event(type_, f"po_{uuid.uuid4().hex}", sid)
    await inbox.deliver(body)
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "ignored" and why in row["reason"]
    assert await status_of(pool, sid) == "dispatching"


async def dead_event(inbox: Inbox, object_id: str) -> str:
    body = rail_event("transfer.created", object_id, None)
    assert (await inbox.post(body)).status_code == 200
    for _ in range(3):  # the budget of Inbox's worker
        await inbox.worker.drain()
        inbox.clock.advance(minutes=5)
    return event_id(body)


async def test_operator_lists_dead_events_and_replays_one_after_the_fix_audited(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    object_id = f"tr_{uuid.uuid4().hex}"
    dead = await dead_event(inbox, object_id)
    auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    assert (await inbox.operators.get("/v1/inbox?status=dead")).status_code == 401
    page = (await inbox.operators.get("/v1/inbox?status=dead&limit=200", headers=auth)).json()
    [listed] = [e for e in page["data"] if e["rail_event_id"] == dead]
    assert listed["attempts"] == 3 and "no settlement" in listed["reason"]
    bad = await inbox.operators.get("/v1/inbox?status=lost", headers=auth)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_status"

    # The fix: the relay's record of the rail reference had been lost; it is restored.
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=object_id)
    replayed = await inbox.operators.post(f"/v1/inbox/{dead}/replay", headers=auth)
    assert replayed.status_code == 202
    again = await inbox.operators.post(f"/v1/inbox/{dead}/replay", headers=auth)
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_replayable"
    await inbox.worker.drain()
    assert await status_of(pool, sid) == "paid"
    [row] = await inbox_rows(pool, dead)
    assert row["status"] == "applied"
    audit = await pool.fetchrow(
        "SELECT actor, action, detail FROM operator_actions WHERE target = $1", str(row["id"])
    )
    assert (audit["actor"], audit["action"]) == ("alice", "inbox.replay")
    assert json.loads(audit["detail"])["from_status"] == "dead"


async def test_operator_pages_with_a_cursor(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    for _ in range(3):
        await dead_event(inbox, f"tr_{uuid.uuid4().hex}")
    auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    seen: list[int] = []
    cursor = "0"
    while cursor:
        page = (
            await inbox.operators.get(
                f"/v1/inbox?status=dead&limit=2&cursor={cursor}", headers=auth
            )
        ).json()
        seen += [e["id"] for e in page["data"]]
        cursor = page["next_cursor"]
    assert len(seen) >= 3 and seen == sorted(set(seen))


async def test_replay_cli_shares_the_audited_path(pool: asyncpg.Pool) -> None:
    from services.inbox.operator import replay
    from services.platform.clock import utc_now

    inbox = Inbox(pool)
    dead = await dead_event(inbox, f"tr_{uuid.uuid4().hex}")
    async with pool.acquire() as conn:
        row_id = await replay(conn, dead, "bob", utc_now())
    [row] = await inbox_rows(pool, dead)
    assert row["id"] == row_id and row["status"] == "received" and row["attempts"] == 0
    actor = await pool.fetchval("SELECT actor FROM operator_actions WHERE target = $1", str(row_id))
    assert actor == "bob"
    assert isinstance(inbox.worker, InboxWorker)


async def test_metrics_are_served_and_documented(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    assert (await inbox.post(rail_event("transfer.created", "tr_m", None))).status_code == 200
    response = await inbox.admin.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert 'settle_inbox_received_total{outcome="stored"} 1.0' in response.text
    documented = (await inbox.admin.get("/openapi.json")).json()["paths"]
    # The inbox holds no operator's token: its events are the operator API's to show.
    assert "/metrics" in documented and not [p for p in documented if p.startswith("/v1/")]
