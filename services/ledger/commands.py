"""Kafka intake of `settlement.commands`: the same accept core as HTTP, batch by batch.

A command is booked only for a configured tenant and, where signing is required, only with
its tenant's signature (command_auth.py), and only within the tenant's limits, as HTTP
requests are (`ledger.admission`). Whatever cannot be booked, a record that does not decode
included, is dead-lettered with its reason (dead_letters.py) and passed: no record stops
the intake. Commands are not refused by rate or load: already queued in Kafka, they are
fetched one batch at a time, and only while the ledger's backlog has room, so the consumer's
pace bounds them and a loaded ledger stops fetching instead (back-pressure).

Offsets move only after the batch's transaction committed and its dead letters were
acknowledged by Kafka. A crash anywhere before that redelivers the batch, and the
idempotency keys turn the redelivery into replays: no second settlement.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack, ExitStack
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError
from opentelemetry.trace import SpanKind

from services.adapters.kafka.clients import header, messages_behind, run_reconnecting, started
from services.adapters.postgres.store_errors import is_retriable
from services.contracts import avro
from services.contracts.command_signature import SIGNATURE_HEADER
from services.domain.errors import SchemaError
from services.domain.trace_context import TraceContext, carried
from services.ledger.admission import Admission
from services.ledger.command_auth import CommandAuthority, written_at
from services.ledger.dead_letters import DeadLetter, DeadLetters
from services.ledger.errors import InvalidRequest
from services.ledger.intake import parse_settlement_command
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.ledger.ports import Acceptor
from services.platform.metrics import ConsumerLag
from services.platform.tracing import TRACEPARENT, TRACESTATE, traced

log = logging.getLogger(__name__)
CONSUMER_GROUP = "settle-ledger"

# A command whose key is still in flight elsewhere is retried; these outcomes are final and,
# being the sender's mistake, dead-lettered so the sender can see them.
DEAD_LETTER_OUTCOMES = {
    Outcome.MISMATCH: "idempotency_key_reused",
    Outcome.EXPIRED: "idempotency_key_expired",
    Outcome.DUPLICATE_REFERENCE: "duplicate_reference",
    Outcome.UNBOOKABLE: "unbookable",
    Outcome.INSUFFICIENT_FUNDS: "insufficient_funds",
}
UNAVAILABLE_BACKOFF_S = 1.0
LAG_SERVICE = "ledger"  # the `service` label of the intake's settle_consumer_lag


class CommandIntake:
    """Consumes settlement commands into the ledger; `run` until cancelled."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        producer: AIOKafkaProducer,
        acceptor: Acceptor,
        dlq_topic: str,
        authority: CommandAuthority,
        max_records: int = 500,
        metrics: LedgerMetrics | None = None,
        admission: Admission | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.consumer = consumer
        self.acceptor = acceptor
        self.authority = authority
        self.max_records = max_records
        self.metrics = metrics or create_metrics()
        self.admission = admission if admission is not None else Admission()
        self.dead_letters = DeadLetters(producer, dlq_topic, self.metrics)
        self.clock = clock

    async def run(self) -> None:
        """Poll, book, dead-letter and commit, batch after batch, fetching only while the
        ledger's backlog has room."""
        backlog = self.admission.backlog
        lag = ConsumerLag(self.metrics.consumer_lag, LAG_SERVICE)
        while True:
            await backlog.room()
            batches = await self.consumer.getmany(timeout_ms=500, max_records=self.max_records)
            lag.record(await messages_behind(self.consumer))
            records = [r for part in batches.values() for r in part]
            if records:
                with backlog.carry(len(records)):
                    await self.handle(records)

    async def handle(self, records: Sequence[ConsumerRecord]) -> None:
        """Book one polled batch, dead-letter what cannot be booked, then commit its offsets."""
        valid: list[tuple[ConsumerRecord, SettlementRequest]] = []
        dead: list[DeadLetter] = []
        now = int(self.clock())
        with ExitStack() as spans:
            for record in records:
                # Each command's span, child of the trace its headers carry (or a new one).
                sent = carried(_text(record, TRACEPARENT), _text(record, TRACESTATE))
                trace = spans.enter_context(traced("settlement.accept", sent, SpanKind.CONSUMER))
                outcome = self._admit(record, now, trace)
                if isinstance(outcome, DeadLetter):
                    dead.append(outcome)
                else:
                    valid.append((record, outcome))
            results = await self._book_until_done([request for _, request in valid])
        for (record, request), result in zip(valid, results, strict=True):
            self.metrics.count_request(str(result.outcome), request.tenant)
            if result.outcome is Outcome.REPLAYED:
                self.metrics.kafka_dedupe_hits.inc()
            code = DEAD_LETTER_OUTCOMES.get(result.outcome)
            if code is not None:
                dead.append(DeadLetter(record, code, result.body.decode()))
        await self.dead_letters.send_all(dead)
        await self._commit(records)

    def _admit(
        self, record: ConsumerRecord, now: int, trace: TraceContext
    ) -> SettlementRequest | DeadLetter:
        # Who sent it is settled before what it says: a sender that cannot prove its tenant
        # learns nothing from the validation of its commands.
        try:
            command = avro.decode(record.value or b"", "SettlementCommand")
        except SchemaError as e:
            self.metrics.count_request("invalid", None)
            return DeadLetter(record, "undecodable", str(e))
        signature = header(record.headers or (), SIGNATURE_HEADER)
        value = record.value or b""
        at = written_at(record.timestamp, record.timestamp_type, now)
        refusal = self.authority.refusal(command.get("tenant"), value, signature, at)
        if refusal is not None:
            self.metrics.count_request("unauthorized", None)
            return DeadLetter(record, refusal.code, refusal.message)
        try:
            request = self.admission.check(parse_settlement_command(command, trace))
        except InvalidRequest as e:
            self.metrics.count_request("invalid", _tenant_named(command))
            where = f" ({e.field})" if e.field else ""
            return DeadLetter(record, e.code, f"{e.message}{where}")
        return request

    async def _book_until_done(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        # PostgreSQL down or contended: hold the batch and its offsets, retry until it books
        # (fail closed); a failure retrying cannot mend stops the intake instead.
        results: list[AcceptResult | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        while todo:
            try:
                booked = await self.acceptor.accept_many([requests[i] for i in todo])
            except Exception as e:
                if not is_retriable(e):
                    raise
                log.warning("cannot book now (%s); holding %d commands", e, len(todo))
                await asyncio.sleep(UNAVAILABLE_BACKOFF_S)
                continue
            retry = []
            for i, result in zip(todo, booked, strict=True):
                results[i] = result
                if result.outcome is Outcome.IN_USE:
                    retry.append(i)
            todo = retry
            if todo:
                await asyncio.sleep(result.retry_after or 1)
        return [r for r in results if r is not None]

    async def _commit(self, records: Sequence[ConsumerRecord]) -> None:
        offsets: dict[TopicPartition, int] = {}
        for r in records:
            tp = TopicPartition(r.topic, r.partition)
            offsets[tp] = max(offsets.get(tp, 0), r.offset + 1)
        try:
            await self.consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as e:
            # A rebalance took the partitions: the new owner redelivers, the keys dedupe.
            log.warning("offset commit failed, batch will be redelivered: %s", e)


async def consume_commands(
    consumer_of: Callable[[], AIOKafkaConsumer],
    producer_of: Callable[[], AIOKafkaProducer],
    intake_of: Callable[[AIOKafkaConsumer, AIOKafkaProducer], CommandIntake],
) -> None:
    """Consume commands until cancelled, on fresh clients whenever Kafka failed them."""

    async def session(clients: AsyncExitStack) -> None:
        consumer = await started(clients, consumer_of())
        producer = await started(clients, producer_of())
        await intake_of(consumer, producer).run()

    await run_reconnecting("command intake", session, is_retriable)


def _text(record: ConsumerRecord, name: str) -> str | None:
    value = header(record.headers or (), name)
    return None if value is None else value.decode("latin-1")


def _tenant_named(command: dict[str, Any]) -> str | None:
    # The tenant is proven by then (signature or configured): count the refusal under it.
    tenant = command.get("tenant")
    return tenant if isinstance(tenant, str) else None
