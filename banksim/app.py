"""Composition root of the bank simulator: its state, clock and faults, the HTTP app over
them, and uvicorn."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from banksim.bank import Bank
from banksim.clock import SystemClock, WallClock
from banksim.control import bank_registry, control_routes
from banksim.errors import AnswerDropped, BankSimError, Refusal
from banksim.faults import Faults
from banksim.http import MAX_FILE_BYTES, BankHeaders, file_routes, refused, unrouted
from services.platform.metrics import mount_metrics

logger = logging.getLogger(__name__)
TICK_SECONDS = 0.25  # how often the books are caught up with the clock when nobody asks


@dataclass(frozen=True, slots=True)
class BankOptions:
    """How one simulated bank behaves."""

    state_dir: Path
    day_seconds: float = 20.0
    start_date: date = field(default_factory=date.today)  # on the first start only
    faults: Faults = field(default_factory=Faults)
    max_file_bytes: int = MAX_FILE_BYTES


def build(options: BankOptions, wall: WallClock | None = None) -> tuple[Bank, Starlette]:
    """The bank over its state directory, and the ASGI app serving it."""
    bank = Bank.open(
        options.state_dir,
        wall or SystemClock(),
        options.day_seconds,
        options.start_date,
        options.faults,
    )
    return bank, create_app(bank, options.max_file_bytes)


def create_app(bank: Bank, max_file_bytes: int = MAX_FILE_BYTES) -> Starlette:
    """The bank's API, the /_control endpoints, health and metrics, over `bank`."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        ticking = asyncio.create_task(_tick(bank))
        try:
            yield
        finally:
            ticking.cancel()
            await asyncio.gather(ticking, return_exceptions=True)

    app = Starlette(
        routes=file_routes(bank, max_file_bytes) + control_routes(bank),
        middleware=[Middleware(BankHeaders, bank=bank)],
        exception_handlers={Refusal: refused, HTTPException: unrouted},
        lifespan=lifespan,
    )
    mount_metrics(app, bank_registry(bank))
    return app


async def _tick(bank: Bank) -> None:
    # Statements fall due at each day's end whether or not anyone asks
    while True:
        try:
            bank.catch_up()
        except BankSimError:
            # a bug in the simulator (an invalid report, unbalanced books): said once, here,
            # and again by every request after, which catches up the same way
            logger.exception("the books cannot be caught up with the clock")
            raise
        await asyncio.sleep(TICK_SECONDS)


class _QuietDrops(logging.Filter):
    """Keep the lost-answer fault's dropped connections out of the error log."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the traceback of an AnswerDropped."""
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, AnswerDropped)


async def serve(options: BankOptions, host: str, port: int) -> None:
    """Serve the bank on host:port until cancelled or interrupted."""
    bank, app = build(options)
    logging.getLogger("uvicorn.error").addFilter(_QuietDrops())
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing stands in front of the simulator
        timeout_graceful_shutdown=2,
    )
    try:
        await uvicorn.Server(config).serve()
    finally:
        bank.close()
