"""stripe's request log lines: still emitted when stripe's logger or STRIPE_LOG asks for
them, and not even formatted when nobody does."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import stripe
from stripe import _util

from services.adapters.stripe.rail import StripeRail
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailOutcome

INSTRUCTION = RailInstruction(
    "stl_1", "acme", "9f" * 32, "acct_1", 1250, "EUR", PayoutMethod.TRANSFER
)


@asynccontextmanager
async def rail_answering_transfers() -> AsyncIterator[StripeRail]:
    """A StripeRail whose Stripe answers every request with transfer tr_1."""
    body = json.dumps({"id": "tr_1", "object": "transfer"}).encode()
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(body), body)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    rail = StripeRail("sk_test_logs", api_base=f"http://127.0.0.1:{port}")
    try:
        yield rail
    finally:
        await rail.aclose()
        server.close()
        await server.wait_closed()


def formatted_lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every log line stripe formats from now on."""
    lines: list[str] = []
    logfmt = _util.logfmt

    def counting(props: dict[str, object]) -> str:
        lines.append(logfmt(props))  # type: ignore[no-untyped-call]
        return lines[-1]

    monkeypatch.setattr(_util, "logfmt", counting)
    return lines


async def test_nothing_is_formatted_when_nobody_listens(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lines = formatted_lines(monkeypatch)
    monkeypatch.setattr(stripe, "log", None)
    monkeypatch.setattr(_util, "STRIPE_LOG", None)
    caplog.set_level(logging.WARNING, logger="stripe")
    async with rail_answering_transfers() as rail:
        result = await rail.send(INSTRUCTION)

    assert result.outcome is RailOutcome.ACCEPTED
    assert lines == []


async def test_stripes_logger_still_gets_every_line_it_asks_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(stripe, "log", None)
    caplog.set_level(logging.DEBUG, logger="stripe")
    async with rail_answering_transfers() as rail:
        await rail.send(INSTRUCTION)

    said = [r.getMessage() for r in caplog.records if r.name == "stripe"]
    assert any("Request to Stripe api" in line for line in said)
    assert any("API response body" in line and "tr_1" in line for line in said)


async def test_stripe_log_still_prints_to_the_console(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stripe")
    monkeypatch.setattr(stripe, "log", "info")
    async with rail_answering_transfers() as rail:
        await rail.send(INSTRUCTION)

    printed = capsys.readouterr().err
    assert "Request to Stripe api" in printed
    assert "API response body" not in printed  # a debug line, below "info"
