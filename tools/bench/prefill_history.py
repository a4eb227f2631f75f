"""What a pre-filled history is made of, as pure data: the path each kind of finished
settlement took, step by step, with the actor, the postings' accounts and the time after
acceptance of each step, and the shares of final statuses.

The accounts come from the shared posting rules (`holding_account`), so a history booked
from these steps nets, per settlement, to what `settle check`'s books_balance expects.
"""

from __future__ import annotations

from typing import NamedTuple

from services.domain.postings import AccountKind, account_id, entry_kind, holding_account
from services.domain.settlement import SettlementStatus

_S = SettlementStatus

# Per 100 settlements, how many end in each status: most are paid, some refused at dispatch,
# a few reversed after payment.
MIX_PER_100: dict[SettlementStatus, int] = {_S.REVERSED: 2, _S.FAILED: 5, _S.PAID: 93}

PATHS: dict[SettlementStatus, tuple[SettlementStatus, ...]] = {
    _S.PAID: (_S.ACCEPTED, _S.DISPATCHING, _S.SUBMITTED, _S.PAID),
    _S.FAILED: (_S.ACCEPTED, _S.DISPATCHING, _S.FAILED),  # refused by the rail at dispatch
    _S.REVERSED: (_S.ACCEPTED, _S.DISPATCHING, _S.SUBMITTED, _S.PAID, _S.REVERSED),
}
ACTORS: dict[SettlementStatus, str] = {
    _S.ACCEPTED: "ledger",
    _S.DISPATCHING: "relay-1",
    _S.SUBMITTED: "relay-1",
    _S.FAILED: "relay-1",
    _S.PAID: "inbox",
    _S.REVERSED: "inbox",
}
# Seconds after acceptance each step happened: dispatch within milliseconds, the rail's
# confirmation within seconds, a reversal two days later.
AFTER_S: dict[SettlementStatus, float] = {
    _S.ACCEPTED: 0.0,
    _S.DISPATCHING: 0.05,
    _S.SUBMITTED: 0.3,
    _S.FAILED: 0.3,
    _S.PAID: 2.0,
    _S.REVERSED: 2 * 86_400.0,
}
REFUSED = "refused by the rail: destination account closed"
# The rail's webhook that carried each step the inbox applied.
WEBHOOKS: dict[SettlementStatus, str] = {
    _S.PAID: "transfer.created",
    _S.REVERSED: "transfer.reversed",
}


class Step(NamedTuple):
    """One step of a finished settlement's path, as the history tables record it."""

    final: str  # the status the settlement ends in; which path this step belongs to
    sequence: int  # the transition's (and its event's) sequence, from 1
    source: str | None  # the status before the step; None for acceptance
    target: str  # the status after the step
    actor: str  # who made the step
    reason: str | None  # the transition's reason, if any
    entry_kind: str | None  # the journal entry's kind; None when no money moves
    credit: str | None  # the account the money leaves (amount -A)
    debit: str | None  # the account the money reaches (amount +A)
    after_s: float  # seconds after acceptance
    webhook: str | None  # the rail event type the inbox applied for it, if the inbox did


def history_steps(tenant: str, currency: str) -> list[Step]:
    """Every step of every path in `PATHS`, with `tenant`'s accounts in `currency`."""
    steps = []
    for final, path in PATHS.items():
        held, source = AccountKind.FUNDING, None
        for sequence, target in enumerate(path, start=1):
            to = holding_account(target, held)
            moves = to != held
            steps.append(
                Step(
                    final.value,
                    sequence,
                    source.value if source else None,
                    target.value,
                    ACTORS[target],
                    REFUSED if target is _S.FAILED else None,
                    entry_kind(target) if moves else None,
                    account_id(tenant, held, currency) if moves else None,
                    account_id(tenant, to, currency) if moves else None,
                    AFTER_S[target],
                    WEBHOOKS.get(target),
                )
            )
            held, source = to, target
    return steps


def final_status(n: int) -> SettlementStatus:
    """The status the `n`-th settlement of a history ends in, by `MIX_PER_100`."""
    slot = n % 100
    for status, share in MIX_PER_100.items():
        if slot < share:
            return status
        slot -= share
    raise AssertionError("MIX_PER_100 adds up to 100")
