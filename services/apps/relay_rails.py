"""The relay's dispatchers, one per rail the deployment drives (`SETTLE_RAILS`), each with its
own connections, concurrency, retry budget and circuit breaker, so one rail down never slows
another:

    sim | stripe   the Stripe adapter: pass 1 on each settlement's `created` event, pass 2
                   on a timer (services/relay/dispatch.py)
    sepa           payment files: built and uploaded on a timer (services/relay/bank_files.py);
                   the execution date is the bank's business day (its stated one where the
                   bank is the local simulator, the TARGET2 calendar and the wall clock in
                   production)
"""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer

from services.adapters.postgres.store_errors import is_retriable
from services.adapters.sepa.bank import Bank
from services.adapters.sepa.pain001 import Debtor
from services.adapters.stripe.rail import stripe_rail
from services.domain.rail import RailReadError
from services.platform.clock import utc_now
from services.platform.config import RailKind
from services.platform.running import every
from services.platform.service_settings import RelaySettings
from services.relay.bank_files import FileDispatcher, FilePolicy
from services.relay.dispatch import Dispatcher
from services.relay.metrics import RelayMetrics
from services.relay.policy import DispatchPolicy
from services.relay.triggers import trigger_dispatch

SWEEP_SECONDS = 1.0
FILE_SECONDS = 1.0  # how often due instructions are put in a file and waiting files uploaded
# An upload may take the bank a while (it checks the file against the XSD first), and one
# that outlives its lease is harmless: a second upload of the same file gets DU01.
BANK_SECONDS = 30.0


def worker_name() -> str:
    """A name for this relay process in claims and audit rows."""
    return f"settle-relay-{socket.gethostname()}-{os.getpid()}"


@dataclass
class RailDispatch:
    """The dispatchers' loops, and what to close when they end."""

    loops: list[Coroutine[Any, Any, None]] = field(default_factory=list)
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    api: Dispatcher | None = None  # the Stripe adapter's dispatcher, if that rail is driven


def rail_dispatch(
    settings: RelaySettings,
    pool: asyncpg.Pool,
    metrics: RelayMetrics,
    policy: DispatchPolicy,
    consumer: Callable[[], AIOKafkaConsumer],
) -> RailDispatch:
    """A dispatcher for each rail the settings name; see the module docstring."""
    built = RailDispatch()
    if settings.api_rail is not None:
        rail = stripe_rail(
            settings, timeout=policy.call_seconds, connections=policy.concurrent_calls
        )
        api = Dispatcher(
            pool,
            rail,
            metrics,
            worker_name(),
            settings.rail_idempotent,
            policy,
            rail_name=settings.api_rail.value,
        )
        built.api = api
        built.loops += [
            trigger_dispatch(consumer, api, metrics),
            every(SWEEP_SECONDS, api.sweep, "pass 2", is_retriable),
        ]
        built.closers.append(rail.aclose)
    if RailKind.SEPA in settings.rails:
        bank = Bank(settings.sepa_bank_url, timeout=BANK_SECONDS)
        files = FileDispatcher(
            pool, bank, metrics, worker_name(), file_policy(settings), bank_today(settings, bank)
        )
        built.loops.append(every(FILE_SECONDS, files.tick, "payment files", bank_retriable))
        built.closers.append(bank.aclose)
    return built


def file_policy(settings: RelaySettings) -> FilePolicy:
    """How the SEPA rail's files are made, from the settings."""
    debtor = Debtor(settings.sepa_debtor_name, settings.sepa_debtor_iban, settings.sepa_debtor_bic)
    return FilePolicy(debtor, settings.sepa_batch_booking, settings.sepa_cutoff)


def bank_today(settings: RelaySettings, bank: Bank) -> Callable[[], Awaitable[datetime]]:
    """What time it is at the bank: the wall clock in production; locally, the simulator's
    own business day and time, which run a day in seconds."""
    if settings.production:

        async def wall() -> datetime:
            return utc_now()

        return wall

    async def stated() -> datetime:
        return (await bank.clock()).time

    return stated


def bank_retriable(error: BaseException) -> bool:
    """Whether a round of a loop that reads or writes the bank may pass: the bank not
    answering (or answering what cannot be read), or the database away, is waited out;
    anything else stops the service."""
    return isinstance(error, RailReadError) or is_retriable(error)
