"""The check's peak memory on a ledger of a given size: `python -m tools.check.memory`.

For each size, a throwaway database on the server of SETTLE_DATABASE_URL is filled in SQL
with paid settlements (four transitions, a balanced entry, a transferred instruction each),
their four events each go to a throwaway topic, a stand-in simulator answers one effect per
settlement, and each `settle` given runs `check --json` on it as a child process; its peak
resident set (ru_maxrss) is printed, one JSON line per run. Database and topics are dropped
afterwards. Give an older build's `settle` to compare with it on the same data.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import click
from sqlalchemy.engine import make_url

from services.adapters.kafka.access import KafkaAccess, kafka_access
from services.adapters.kafka.clients import admin_client, idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.adapters.postgres.migrate import upgrade
from services.contracts import avro
from services.contracts.topics import EVENTS, TOPICS
from services.domain.settlement import publishes_event, step_event_type
from services.platform.config import libpq_dsn
from services.platform.settings import load_settings
from tools.check.memory_fill import AMOUNT, CURRENCY, STEPS, TENANT, fill


async def publish_events(
    kafka: KafkaAccess, topic: str, settlements: list[tuple[str, str]]
) -> None:
    """Each settlement's events, in order, as the relay would publish them."""
    producer = idempotent_producer(
        kafka, f"check-memory-{uuid.uuid4()}", linger_ms=20, max_batch_bytes=512 * 1024
    )
    await producer.start()
    try:
        sends = []
        for sid, reference in settlements:
            for sequence, (origin, status) in enumerate(STEPS, 1):
                if not publishes_event(origin, status):
                    continue
                event = {
                    "event_id": str(uuid.uuid4()),
                    "settlement_id": sid,
                    "tenant": TENANT,
                    "reference": reference,
                    "type": step_event_type(origin, status),
                    "sequence": sequence,
                    "amount": AMOUNT,
                    "currency": CURRENCY,
                    "occurred_at": datetime.now(UTC),
                    "status": status.value,
                }
                value = avro.encode("SettlementEvent", event)
                sends.append(await producer.send(topic, value, key=sid.encode()))
            if len(sends) >= 20_000:
                await asyncio.gather(*sends)
                sends = []
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


@contextmanager
def effects_served(settlements: list[tuple[str, str]]) -> Iterator[str]:
    """A stand-in for the simulator's GET /_sim/effects: one transfer per settlement, paged
    by `offset` and `limit` as the simulator pages it."""
    ids = [sid for sid, _ in settlements]

    class Effects(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            offset = int(query.get("offset", ["0"])[0])
            limit = int(query.get("limit", [str(len(ids))])[0])
            page = ids[offset : offset + limit]
            following = offset + len(page) if offset + len(page) < len(ids) else None
            body = json.dumps(
                {
                    "by_settlement": {sid: {"transfers": 1} for sid in page},
                    "total": len(ids),
                    "next_offset": following,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Effects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def measure(settle: str, args: list[str], env: dict[str, str]) -> dict[str, object]:
    """Run `settle check --json ARGS` to its end: exit status, seconds, peak RSS in KiB."""
    with tempfile.TemporaryFile() as out:
        started = time.monotonic()
        pid = os.posix_spawn(
            settle,
            [settle, "check", "--json", *args],
            env,
            file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1)],
        )
        _, status, usage = os.wait4(pid, 0)
        seconds = time.monotonic() - started
        out.seek(0)
        printed = out.read()
    try:
        report = json.loads(printed)
    except ValueError:  # the build refused its arguments: no report to read
        report = {"ok": printed.decode(errors="replace")[-300:]}
    # Builds that judge alike print the same bytes on the same data: the digest shows it.
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "seconds": round(seconds, 1),
        "peak_rss_kib": usage.ru_maxrss,
        "ok": report.get("ok"),
        "counts": report.get("counts"),
        "report_sha256": hashlib.sha256(printed).hexdigest()[:16],
    }


async def _create(server_url: str, kafka: KafkaAccess) -> tuple[str, str]:
    """A throwaway database migrated to head and its topics; its URL and topic prefix."""
    name = f"settle_check_memory_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(libpq_dsn(server_url))
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    url = str(make_url(server_url).set(database=name).render_as_string(hide_password=False))
    await asyncio.to_thread(upgrade, url)
    await ensure_topics(kafka, f"{name}.")
    return url, f"{name}."


async def _populate(url: str, kafka: KafkaAccess, prefix: str, size: int) -> list[tuple[str, str]]:
    """`size` settlements in the database and their events on the topic."""
    settlements = await fill(url, size)
    await publish_events(kafka, f"{prefix}{EVENTS}", settlements)
    return settlements


async def _drop(server_url: str, kafka: KafkaAccess, url: str, prefix: str) -> None:
    """The throwaway database and topics gone."""
    conn = await asyncpg.connect(libpq_dsn(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')
    finally:
        await conn.close()
    admin = admin_client(kafka, "check-memory")
    await admin.start()
    try:
        await admin.delete_topics([f"{prefix}{t.name}" for t in TOPICS])
    finally:
        await admin.close()


@click.command()
@click.option(
    "--settlements",
    "sizes",
    default="100000,200000",
    show_default=True,
    help="Ledger sizes to measure, comma-separated.",
)
@click.option(
    "--settle",
    "builds",
    multiple=True,
    help="A `settle` executable to measure (repeat to compare builds); default this one.",
)
@click.option(
    "--page-size",
    type=click.IntRange(1),
    default=None,
    help="Passed to `settle check` (builds that page only).",
)
def main(sizes: str, builds: tuple[str, ...], page_size: int | None) -> None:
    """Peak memory of `settle check` per ledger size and build, one JSON line each."""
    settings = load_settings()
    kafka = kafka_access(settings)
    default = str(Path(sys.executable).parent / "settle")
    args = ["--page-size", str(page_size)] if page_size else []
    for size in (int(n) for n in sizes.split(",")):
        url, prefix = asyncio.run(_create(settings.database_url, kafka))
        try:
            settlements = asyncio.run(_populate(url, kafka, prefix, size))
            with effects_served(settlements) as rail_url:
                del settlements
                env = {**os.environ, "SETTLE_DATABASE_URL": url, "SETTLE_TOPIC_PREFIX": prefix}
                for settle in builds or (default,):
                    figures = measure(settle, [*args, "--rail-url", rail_url], env)
                    click.echo(json.dumps({"settlements": size, "settle": settle, **figures}))
        finally:
            asyncio.run(_drop(settings.database_url, kafka, url, prefix))


if __name__ == "__main__":
    main()
