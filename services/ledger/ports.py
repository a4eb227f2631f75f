"""The narrow interfaces the ledger's entry points depend on; app.py hands in the real ones."""

from __future__ import annotations

from typing import Protocol

from services.ledger.model import AcceptResult, SettlementRequest


class Acceptor(Protocol):
    """Books settlements with the idempotency contract; the one core both ingress paths call."""

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        """Book `request` (or replay or refuse it) and return the response to send."""
        ...

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        """Book a batch in as few transactions as possible; results in request order."""
        ...
