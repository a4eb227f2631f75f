"""The demo batch: half the settlements as Kafka commands, half over HTTP, with retries.

Each settlement has a reference `demo-<run>-<n>` so the batch can be followed in PostgreSQL
whatever else the database holds. Deliberate repeats test the idempotency contract on the way:
every 20th command is published twice; every 10th HTTP request is re-sent under the same key
(the first answer comes back, replayed); every 25th reference is re-sent under another key
(refused, 409 `duplicate_reference`). None of them may make a second settlement.

Each sender offers its settlements as a `Pace` has them fall due (tools/run/pace.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.contracts import avro
from services.contracts.command_signature import signed_headers
from services.platform.service_settings import Settings
from tools.run.pace import AT_ONCE, Pace

CURRENCIES = ("USD", "EUR", "GBP")
# Accounts of the SEPA share of a batch: documented example IBANs, one per country.
IBANS = (
    "DE89370400440532013000",
    "FR1420041010050500013M02606",
    "ES9121000418450200051332",
    "IT60X0542811101000000123456",
    "NL91ABNA0417164300",
    "BE68539007547034",
    "AT611904300234573201",
)
HTTP_CLIENTS = 16
HTTP_ATTEMPTS = 6  # a 5xx, 409 in use or a dropped connection is retried under the same key
HTTP_BACKOFF_MAX_S = 3.2
KAFKA_REPEAT_EVERY, HTTP_RETRY_EVERY, HTTP_DUPLICATE_EVERY = 20, 10, 25


@dataclass(frozen=True)
class Batch:
    """Who submits the batch and how it is named."""

    run_id: str  # names the batch's references and keys
    tenant: str
    token: str  # the tenant's bearer token for HTTP
    count: int
    # The tenant's command-signing secrets, if any; never in a repr.
    signing_secrets: tuple[str, ...] = field(default=(), repr=False)
    # The rails the stack drives: with sepa, its euro settlements are paid by SEPA credit
    # transfer, and all of them are in euros when sepa is the only one.
    rails: tuple[str, ...] = ("sim",)

    @property
    def reference_pattern(self) -> str:
        """A SQL LIKE pattern matching the batch's references."""
        return f"demo-{self.run_id}-%"


def signing_secrets(settings: Settings, tenant: str) -> tuple[str, ...]:
    """The secrets `tenant` signs its Kafka commands with (none: commands go unsigned)."""
    return tuple(s.get_secret_value() for s in settings.command_signing_secrets.get(tenant, ()))


def body(batch: Batch, n: int) -> dict[str, object]:
    """The n-th settlement of the batch, the same way each time it is asked for; where the
    stack drives sepa, the euro ones go to an IBAN by SEPA credit transfer."""
    currency = "EUR" if batch.rails == ("sepa",) else CURRENCIES[n % len(CURRENCIES)]
    by_sepa = "sepa" in batch.rails and currency == "EUR"
    settlement: dict[str, object] = {
        "reference": f"demo-{batch.run_id}-{n:06d}",
        "payee": f"payee-{n % 97}",
        "destination": IBANS[n % len(IBANS)] if by_sepa else f"acct_demo{n % 50:02d}",
        "amount": 100 + (n * 7919) % 99_900,
        "currency": currency,
        "metadata": {"batch": batch.run_id},
    }
    if by_sepa:
        settlement["rail"] = "sepa"
    return settlement


def key(batch: Batch, n: int) -> str:
    """The idempotency key of the n-th settlement."""
    return f"demo-{batch.run_id}-k{n:06d}"


async def publish_commands(
    batch: Batch, numbers: range, kafka: KafkaAccess, topic: str, pace: Pace = AT_ONCE
) -> int:
    """Publish SettlementCommands for `numbers` (some twice) as `pace` has them fall due; how
    many messages were sent."""
    producer = idempotent_producer(kafka, f"settle-demo-{batch.run_id}")
    sent = 0
    try:
        await producer.start()  # inside: a failed start must still close what it opened
        for index, n in enumerate(numbers):
            await pace.due(index)
            command = {**body(batch, n), "tenant": batch.tenant, "idempotency_key": key(batch, n)}
            command.setdefault("rail", None)
            value = avro.encode("SettlementCommand", command)
            headers = signed_headers(batch.signing_secrets, value, int(time.time()))
            for _ in range(2 if n % KAFKA_REPEAT_EVERY == 0 else 1):
                await producer.send(
                    topic, value, key=str(command["reference"]).encode(), headers=headers
                )
                sent += 1
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def _post(
    client: httpx.AsyncClient, idem_key: str, payload: bytes, attempts: int = HTTP_ATTEMPTS
) -> httpx.Response:
    for attempt in range(attempts):
        try:
            answer = await client.post(
                "/v1/settlements", content=payload, headers={"Idempotency-Key": idem_key}
            )
        except httpx.TransportError:
            if attempt == attempts - 1:
                raise
        else:
            in_use = answer.status_code == 409 and b"idempotency_key_in_use" in answer.content
            if answer.status_code < 500 and not in_use:
                return answer
            if attempt == attempts - 1:
                return answer
        await asyncio.sleep(min(0.2 * 2**attempt, HTTP_BACKOFF_MAX_S))
    raise AssertionError("unreachable")


def _outcome(answer: httpx.Response) -> str:
    if answer.status_code == 201:
        replayed = answer.headers.get("Idempotent-Replayed") == "true"
        return "replayed" if replayed else "created"
    try:
        code = str(answer.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        code = "error"
    return f"{answer.status_code} {code}"


async def post_settlements(
    batch: Batch,
    numbers: range,
    ledger_url: str,
    on_answer: Callable[[], None],
    attempts: int = HTTP_ATTEMPTS,
    pace: Pace = AT_ONCE,
) -> Counter[str]:
    """POST `numbers` to the ledger as `pace` has them fall due, with retries and duplicates;
    answers counted by outcome.

    Each request is tried up to `attempts` times under its key (a longer outage needs more).
    """
    outcomes: Counter[str] = Counter()
    gate = asyncio.Semaphore(HTTP_CLIENTS)
    auth = {"Authorization": f"Bearer {batch.token}", "Content-Type": "application/json"}

    async def one(client: httpx.AsyncClient, index: int, n: int) -> None:
        payload = json.dumps(body(batch, n)).encode()
        await pace.due(index)
        async with gate:
            outcomes[_outcome(await _post(client, key(batch, n), payload, attempts))] += 1
            if n % HTTP_RETRY_EVERY == 0:  # the caller never saw the answer and retries
                outcomes[_outcome(await _post(client, key(batch, n), payload, attempts))] += 1
            if n % HTTP_DUPLICATE_EVERY == 0:  # the same payout asked for under a new key
                outcomes[
                    _outcome(await _post(client, key(batch, n) + "-again", payload, attempts))
                ] += 1
        on_answer()

    limits = httpx.Limits(max_connections=HTTP_CLIENTS)
    async with httpx.AsyncClient(
        base_url=ledger_url, headers=auth, timeout=30.0, limits=limits
    ) as client:
        await asyncio.gather(*(one(client, index, n) for index, n in enumerate(numbers)))
    return outcomes
