"""Kafka over SASL_SSL: the ledger's command intake, the relay and `settle check` reach a broker
whose client port takes only TLS with SCRAM-SHA-512 logins, as `settle infra up
--kafka-security sasl_ssl` starts it; a wrong password and a PLAINTEXT client are refused.

The broker is a private one (its own data dir, certificates and ports, the shared jar cache);
the services get only its SASL_SSL port, so nothing here can fall back to PLAINTEXT."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import asyncpg
import httpx
import pytest
from aiokafka.errors import KafkaConnectionError
from pydantic import SecretStr

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import idempotent_producer
from services.adapters.kafka.topics import ensure_topics
from services.contracts import avro
from services.contracts.topics import COMMANDS
from tests.conftest import asyncpg_dsn, unique
from tests.e2e.relay_process import (
    process,
    wait_healthy,
)
from tests.e2e.test_ledger_crash import SETTLE
from tests.waiting import eventually
from tools.infra import kafka
from tools.infra.kafka_secure import client_env
from tools.infra.paths import RunPaths, run_paths
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaAccess]:
    """A private broker with a SASL_SSL listener; how a client with the login reaches it."""
    usual = run_paths()
    paths = RunPaths(
        root=usual.root,
        run=tmp_path_factory.mktemp("sasl-ssl") / "run",
        jars=usual.kafka_lib,
        # Broker, controller and SASL_SSL ports: three in a row, away from the shared broker.
        kafka_bootstrap=f"127.0.0.1:{free_ports(3)}",
        kafka_sasl_ssl=True,
    )
    paths.run.mkdir()
    kafka.start(paths)
    try:
        plaintext, secure = kafka.accesses(paths)
        assert secure.bootstrap != plaintext.bootstrap
        yield secure
    finally:
        kafka.stop(paths)


def command(tenant: str) -> bytes:
    return avro.encode(
        "SettlementCommand",
        {
            "tenant": tenant,
            "idempotency_key": unique("key-"),
            "reference": unique("ref-"),
            "payee": "payee",
            "destination": "acct_1",
            "amount": 1250,
            "currency": "EUR",
            "rail": None,
            "metadata": {},
        },
    )


async def final_statuses(db: asyncpg.Connection, tenant: str, seconds: float) -> list[str]:
    """The statuses of `tenant`'s settlements once one is booked and none is in flight."""
    query = "SELECT status FROM settlements WHERE tenant = $1"

    async def final() -> list[str] | None:
        statuses = [str(s) for s in await db.fetchval(f"SELECT array({query})", tenant)]
        if statuses and not set(statuses) & {"accepted", "dispatching", "submitted"}:
            return statuses
        return None

    found: list[str] = await eventually(final, seconds, "every settlement final")
    return found


async def settle_check(env: dict[str, str], rail_url: str) -> tuple[int, dict[str, object]]:
    """`settle check --json` with `env`: its exit status and its JSON."""
    process = await asyncio.create_subprocess_exec(
        SETTLE,
        "check",
        "--json",
        "--wait-quiet",
        "60",
        "--rail-url",
        rail_url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    return await process.wait(), json.loads(out)


async def test_a_command_is_booked_dispatched_and_checked_over_sasl_ssl(
    database: str,
    secure_broker: KafkaAccess,
    tmp_path: Path,
) -> None:
    prefix, tenant = unique("t") + ".", unique("sasl")
    await ensure_topics(secure_broker, prefix)
    sim_port, inbox_port = free_ports(), free_ports()
    rail_url = f"http://127.0.0.1:{sim_port}"
    webhooks = f"http://127.0.0.1:{inbox_port}/v1/webhooks/stripe"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= client_env(secure_broker) | {
        "SETTLE_DATABASE_URL": database,
        "SETTLE_TOPIC_PREFIX": prefix,
        "STRIPE_API_BASE": rail_url,
        "SETTLE_API_TOKENS": f"{tenant}:{unique('tok-')}",
    }
    producer = idempotent_producer(secure_broker, unique("sasl-upstream-"))
    db = await asyncpg.connect(asyncpg_dsn(database))
    try:
        with (
            process(["inbox", "--port", str(inbox_port)], env, tmp_path / "inbox.log"),
            process(
                ["railsim", "--port", str(sim_port), "--webhook-url", webhooks],
                env,
                tmp_path / "railsim.log",
            ),
            process(["ledger", "--port", str(free_ports())], env, tmp_path / "ledger.log"),
            process(["relay", "--metrics-port", str(free_ports())], env, tmp_path / "relay.log"),
        ):
            await producer.start()
            try:
                await producer.send_and_wait(f"{prefix}{COMMANDS}", command(tenant))
            finally:
                await producer.stop()
            # Booked by the intake, published by the relay, its `created` event consumed by
            # the relay's trigger and dispatched to the rail: every Kafka hop over SASL_SSL.
            assert await final_statuses(db, tenant, 120) == ["paid"]
            status, report = await settle_check(env, rail_url)
    finally:
        await db.close()
    assert status == 0, {
        k: v for k, v in report.items() if isinstance(v, dict) and not v.get("ok", True)
    }
    counts = report["counts"]
    assert isinstance(counts, dict) and counts["events_read"] >= 2  # created, then submitted


async def test_a_wrong_password_and_a_plaintext_client_are_refused(
    database: str,
    secure_broker: KafkaAccess,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    assert secure_broker.login is not None
    wrong = replace(secure_broker, login=replace(secure_broker.login, password=SecretStr("nope")))
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaConnectionError):
        await kafka.broker_count(wrong, timeout_s=10)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaConnectionError):
        await kafka.broker_count(KafkaAccess(secure_broker.bootstrap), timeout_s=10)
    assert f'Unable connect to "{secure_broker.bootstrap}"' in caplog.text
    # The right login is answered, so the refusals above are the broker's.
    assert await kafka.broker_count(secure_broker, timeout_s=10) == 1
    # A settle command with the wrong password gives no verdict and says why.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= client_env(wrong) | {"SETTLE_DATABASE_URL": database}
    sim_port = free_ports()
    rail_url = f"http://127.0.0.1:{sim_port}"
    with process(["railsim", "--port", str(sim_port)], env, tmp_path / "railsim.log"):
        async with httpx.AsyncClient(base_url=rail_url) as rail:
            await wait_healthy(rail)  # so that Kafka, not the rail, is what the check misses
        checking = await asyncio.create_subprocess_exec(
            SETTLE,
            "check",
            "--json",
            "--rail-url",
            rail_url,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await checking.communicate()
    assert await checking.wait() == 2, out
    assert json.loads(out)["error"]["source"] == "kafka"
    assert b"SaslAuthenticationFailed" in err
