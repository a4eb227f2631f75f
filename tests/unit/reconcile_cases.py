"""Settlements and rail objects that agree, for the reconciliation tests to bend one field of."""

from __future__ import annotations

import uuid

from services.domain.payout import PayoutMethod
from services.domain.reconciliation import LedgerRecord, RailObject
from services.domain.settlement import SettlementStatus

NOW = 1_800_000_000
GRACE = 600
LONG_AGO = NOW - 86_400


def sid(n: int) -> str:
    """A settlement id that sorts by `n`."""
    return str(uuid.UUID(int=n))


def settled(
    n: int,
    status: SettlementStatus = SettlementStatus.PAID,
    *,
    amount: int = 1_000,
    sent_at: int | None = LONG_AGO,
    reference: bool = True,
) -> LedgerRecord:
    """Settlement `n` as the ledger books it, sent long ago, referencing transfer `tr_<n>`."""
    reversed_ = amount if status is SettlementStatus.REVERSED else 0
    return LedgerRecord(
        sid(n),
        "acme",
        amount,
        "EUR",
        f"acct_{n}",
        status,
        reversed_,
        f"tr_{n}" if reference else None,
        sent_at,
    )


def transfer(
    n: int, *, amount: int = 1_000, reversed_: int = 0, created: int = LONG_AGO, **changes: object
) -> RailObject:
    """Transfer `tr_<n>` for settlement `n`, agreeing with `settled(n)`."""
    obj = RailObject(
        f"tr_{n}",
        PayoutMethod.TRANSFER,
        amount,
        reversed_,
        "EUR",
        f"acct_{n}",
        None,
        created,
        sid(n),
    )
    return obj._replace(**changes)


def payout(n: int, status: str, **changes: object) -> RailObject:
    """Payout `po_<n>` for settlement `n` in the rail's `status`, agreeing on money."""
    obj = RailObject(
        f"po_{n}", PayoutMethod.PAYOUT, 1_000, 0, "EUR", f"acct_{n}", status, LONG_AGO, sid(n)
    )
    return obj._replace(**changes)
