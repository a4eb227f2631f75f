"""One trace per settlement across the stack: a settlement asked for over HTTP with a
`traceparent`, and one asked for over Kafka with a `traceparent` header, each keep their
caller's trace id on the HTTP answer (a replay's too), on every event of theirs on
settlement.events, and on the relay's and the inbox's JSON log lines about them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import asyncpg
import httpx
import pytest
from aiokafka import AIOKafkaConsumer

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import connection_options, header, idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import COMMANDS, EVENTS
from services.domain.settlement import SettlementStatus as S
from services.domain.settlement import publishes_event
from tests.conftest import asyncpg_dsn, unique
from tests.e2e.relay_process import (
    process,
    wait_healthy,
)
from tests.e2e.test_kafka_sasl_ssl import final_statuses
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
HTTP_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
KAFKA_TRACE = "0af7651916cd43dd8448eb211c80319c"


def traceparent(trace_id: str, span_id: str = "00f067aa0ba902b7") -> str:
    return f"00-{trace_id}-{span_id}-01"


def trace_id(value: bytes | str | None) -> str | None:
    text = value.decode() if isinstance(value, bytes) else value
    return None if text is None else text.split("-")[1]


def body(reference: str) -> dict[str, object]:
    return {
        "reference": reference,
        "payee": "p",
        "destination": "acct_1",
        "amount": 1250,
        "currency": "EUR",
    }


async def submit_command(access: KafkaAccess, topic: str, tenant: str, reference: str) -> None:
    command = avro.encode(
        "SettlementCommand",
        {
            "tenant": tenant,
            "idempotency_key": unique("key-"),
            **body(reference),
            "rail": None,
            "metadata": {},
        },
    )
    producer = idempotent_producer(access, unique("traces-upstream-"))
    await producer.start()
    try:
        headers = [("traceparent", traceparent(KAFKA_TRACE).encode())]
        await producer.send_and_wait(topic, command, headers=headers)
    finally:
        await producer.stop()


async def published_steps(db: asyncpg.Connection, ids: list[str]) -> dict[str, int]:
    """Per settlement, how many of its steps published an event (all but a move to
    dispatching)."""
    rows = await db.fetch(
        "SELECT settlement_id::text, from_status, to_status FROM settlement_transitions"
        " WHERE settlement_id = ANY($1::uuid[])",
        ids,
    )
    counts = dict.fromkeys(ids, 0)
    for sid, source, target in rows:
        counts[sid] += publishes_event(S(source) if source else None, S(target))
    return counts


async def event_traces(
    access: KafkaAccess, topic: str, wanted: dict[str, int]
) -> dict[str, list[str]]:
    """Per settlement in `wanted`, the trace id of each of its events on `topic` (as many as
    it published), in order."""
    consumer = AIOKafkaConsumer(
        topic, **connection_options(access), group_id=None, auto_offset_reset="earliest"
    )
    found: dict[str, list[str]] = {sid: [] for sid in wanted}
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            while any(len(found[sid]) < count for sid, count in wanted.items()):
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for r in records:
                        sid = (header(r.headers, "settlement_id") or b"").decode()
                        if sid in found:
                            found[sid].append(trace_id(header(r.headers, "traceparent")) or "")
    finally:
        await consumer.stop()
    return found


async def logged(path: Path, settlement_id: str, seconds: float = 20) -> list[dict[str, object]]:
    """The JSON lines of a service's output that are about `settlement_id` (some, in time)."""

    async def about() -> list[dict[str, object]]:
        text = await asyncio.to_thread(path.read_text)
        lines = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
        return [line for line in lines if line.get("settlement_id") == settlement_id]

    found: list[dict[str, object]] = await eventually(
        about, seconds, f"lines about {settlement_id}"
    )
    return found


async def test_a_settlement_keeps_its_callers_trace_from_request_to_webhook(
    database: str,
    kafka_bootstrap: str,
    tmp_path: Path,
) -> None:
    access, prefix = KafkaAccess(kafka_bootstrap), unique("t") + "."
    tenant, token = unique("tr"), unique("tok-")
    await ensure_topics(access, prefix)
    sim_port, inbox_port, ledger_port = free_ports(), free_ports(), free_ports()
    rail_url = f"http://127.0.0.1:{sim_port}"
    webhooks = f"http://127.0.0.1:{inbox_port}/v1/webhooks/stripe"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {
        "SETTLE_DATABASE_URL": database,
        "SETTLE_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "SETTLE_TOPIC_PREFIX": prefix,
        "STRIPE_API_BASE": rail_url,
        "SETTLE_API_TOKENS": f"{tenant}:{token}",
        "SETTLE_LOG_LEVEL": "debug",  # each settlement's routine lines are debug
    }
    relay_log, inbox_log = tmp_path / "relay.log", tmp_path / "inbox.log"
    db = await asyncpg.connect(asyncpg_dsn(database))
    try:
        with (
            process(
                ["inbox", "--port", str(inbox_port), "--admin-port", str(free_ports())],
                env,
                inbox_log,
            ),
            process(
                ["railsim", "--port", str(sim_port), "--webhook-url", webhooks],
                env,
                tmp_path / "railsim.log",
            ),
            process(
                ["ledger", "--port", str(ledger_port), "--admin-port", str(free_ports())],
                env,
                tmp_path / "ledger.log",
            ),
            process(["relay", "--metrics-port", str(free_ports())], env, relay_log),
        ):
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ledger_port}") as ledger:
                await wait_healthy(ledger)
                headers = {
                    "Authorization": f"Bearer {token}",
                    "Idempotency-Key": unique("k-"),
                    "traceparent": traceparent(HTTP_TRACE),
                }
                created = await ledger.post("/v1/settlements", json=body("r-http"), headers=headers)
                # A replay, continuing another trace, answers with the settlement's.
                headers["traceparent"] = traceparent("1" * 32)
                replayed = await ledger.post(
                    "/v1/settlements", json=body("r-http"), headers=headers
                )
            assert created.status_code == replayed.status_code == 201, created.text
            assert trace_id(created.headers["traceparent"]) == HTTP_TRACE
            assert replayed.headers["traceparent"] == created.headers["traceparent"]
            await submit_command(access, f"{prefix}{COMMANDS}", tenant, "r-kafka")
            assert await final_statuses(db, tenant, 120) == ["paid", "paid"]
            rows = await db.fetch(
                "SELECT reference, id::text FROM settlements WHERE tenant = $1", tenant
            )
            ids = {ref: sid for ref, sid in rows}
            expected = {ids["r-http"]: HTTP_TRACE, ids["r-kafka"]: KAFKA_TRACE}
            published = await published_steps(db, list(ids.values()))
            events = await event_traces(access, f"{prefix}{EVENTS}", published)
            lines = {
                (sid, name): await logged(path, sid)
                for sid in expected
                for name, path in (("relay", relay_log), ("inbox", inbox_log))
            }
    finally:
        await db.close()
    for sid, trace in expected.items():
        # created, (submitted,) paid: every one of them
        assert len(events[sid]) >= 2 and set(events[sid]) == {trace}, (sid, events[sid])
        for name in ("relay", "inbox"):
            about = lines[(sid, name)]
            assert {(line["trace_id"], line["tenant"]) for line in about} == {(trace, tenant)}, (
                about
            )
            assert {line["service"] for line in about} == {name}
