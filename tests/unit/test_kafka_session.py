"""The Kafka session helper: clients started and always stopped, a new session after Kafka or a
retriable failure, and any other failure raised."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError

from services.adapters.kafka import clients as kafka
from services.adapters.kafka.clients import run_reconnecting, started
from services.adapters.postgres.store_errors import is_retriable
from services.domain.errors import StoreUnavailable
from services.settlement.transitions import TransitionConflict


class Client:
    """A producer or consumer that records its lifecycle."""

    def __init__(self, log: list[str], name: str, fails_to_start: bool = False) -> None:
        self.log, self.name, self.fails_to_start = log, name, fails_to_start

    async def start(self) -> None:
        self.log.append(f"start {self.name}")
        if self.fails_to_start:
            raise KafkaConnectionError("broker away")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka, "RECONNECT_BASE_S", 0.001)
    monkeypatch.setattr(kafka, "RECONNECT_CAP_S", 0.01)


async def test_a_session_failed_by_kafka_or_a_retriable_error_starts_afresh() -> None:
    log: list[str] = []
    failures: list[Exception] = [
        KafkaTimeoutError(),  # says itself it is not retriable; new clients mend it all the same
        StoreUnavailable("PostgreSQL did not answer"),
    ]

    async def session(clients: AsyncExitStack) -> None:
        await started(clients, Client(log, "consumer"))
        await started(clients, Client(log, "producer"))
        if failures:
            raise failures.pop(0)

    await asyncio.wait_for(run_reconnecting("test", session, is_retriable), 5)
    assert log == ["start consumer", "start producer", "stop producer", "stop consumer"] * 3


async def test_a_client_that_failed_to_start_is_stopped_and_started_again() -> None:
    log: list[str] = []
    attempts = 0

    async def session(clients: AsyncExitStack) -> None:
        nonlocal attempts
        attempts += 1
        await started(clients, Client(log, "producer", fails_to_start=attempts == 1))

    await asyncio.wait_for(run_reconnecting("test", session, is_retriable), 5)
    assert log == ["start producer", "stop producer"] * 2


async def test_a_failure_no_new_session_can_mend_is_raised_after_stopping_the_clients() -> None:
    log: list[str] = []

    async def session(clients: AsyncExitStack) -> None:
        await started(clients, Client(log, "consumer"))
        raise TransitionConflict("settlement changed under its row lock")

    with pytest.raises(TransitionConflict):
        await asyncio.wait_for(run_reconnecting("test", session, is_retriable), 5)
    assert log == ["start consumer", "stop consumer"]
