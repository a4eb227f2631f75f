"""The nostro view inside a run: the rail's balance, read at the run's end, against the balance
the last run recorded and against the ledger's in_transit and paid_out accounts (the pure
comparison is services/reconcile/nostro.py).

    1. read the rail's closing balance (`GET /v1/balance`, available + pending) as of a whole
       cut-off second C: the balance transactions created since C are listed before and after
       the balance is read and taken back out of it; if the two lists differ, read again
       (money moved meanwhile), and if they differ every time, the run records no balance
       and judges none: the next run measures from the last recorded one, over a longer
       window, never from a balance assumed
    2. the opening balance is the latest one a completed, quiet run recorded, as of O <= C; a
       first run has none: it records its balance and raises no balance break. A run is
       quiet when every item it compared agreed with the rail (nothing pending, no status
       drift, nothing healed) and no rail instruction is mid-dispatch (the rail may have
       acted on a call the ledger has not recorded yet: a relay frozen after its write is
       recorded only once its successor takes over). Only then has the ledger caught up with
       what the rail did before the cut-off; a drift healed later books its postings after
       the rail moved, a timing difference, not a break. So a balance is judged, and may
       open a later comparison, only in a quiet run; any other run records its balance and
       judges none
    3. the balance transactions created in [O, C) (listed by `created`, a page at a time,
       each with its source expanded) are read as settle's (the source carries settle's
       mark, or a settlement claims it or the transfer a reversal reversed) or another
       system's. Their net must move the opening balance to the closing one (field
       `balance_transactions`), and the gross of settle's payee moves must be what the
       postings booked in [O, C) moved into in_transit and paid_out (field `balance`): else
       a balance_mismatch per currency, with the difference. Each fee the rail kept on one of
       settle's moves is booked once, by the move's id, from the platform's funding to its
       rail fees (unless the run is read-only)
    4. record the closing balance with the run: the next run opens from it

The cut-off trails the run's end by LAG, so journal entries stamped before it have committed
when the ledger is read. A movement the rail booked before the cut-off and the ledger after it
(a transfer in flight across it) reads as a mismatch in one run and the opposite in the next.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.stripe.source import PAGE_SIZE, RailSource
from services.domain.reconciliation import BalanceMove, Break
from services.reconcile import ledger_source, nostro, nostro_store
from services.reconcile.nostro_store import Balance
from services.settlement.rail_charges import RailCharge, book_charges

LAG = timedelta(seconds=1)
FEE_RAIL = "stripe"  # the rail a fee on this account is recorded under
READ_ATTEMPTS = 5  # readings tried for one that no movement interleaved


async def balance_breaks(
    pool: asyncpg.Pool,
    rail: RailSource,
    run_id: int,
    now: datetime,
    *,
    quiet: bool,
    book_fees: bool = True,
) -> list[Break]:
    """The balance_mismatch breaks since the last quiet recorded balance (none on a first run,
    none unless this run is `quiet`), after recording the closing balance with running run
    `run_id`; the fees the rail kept on settle's own moves of the window are booked first,
    unless `book_fees` is False (a read-only run)."""
    closing = await closing_balance(rail, now - LAG)
    if closing is None:
        return []
    quiet = quiet and not await nostro_store.mid_dispatch(pool)
    opening = await nostro_store.opening_balance(pool, closing.as_of) if quiet else None
    found: list[Break] = []
    if opening is not None:
        moves = await moves_between(pool, rail, opening.as_of, closing.as_of)
        if book_fees:
            await book_charges(pool, [fee_charge(m) for m in moves.fees], now=now)
        postings = await nostro_store.postings_between(pool, opening.as_of, closing.as_of)
        found = nostro.statement_breaks(opening.by_currency, closing.by_currency, moves.summed)
        found += nostro.balance_breaks(moves.summed, postings)
    await nostro_store.record_balance(pool, run_id, closing, quiet=quiet)
    return found


async def closing_balance(rail: RailSource, at: datetime) -> Balance | None:
    """The rail's balance as of the whole second at or before `at`: every balance transaction
    created before it, none after; None if money moved during every reading."""
    cut_off = math.floor(at.timestamp())
    for _ in range(READ_ATTEMPTS):
        before = [m async for m in rail.balance_moves({"gte": cut_off})]
        balance = await rail.balance()
        after = [m async for m in rail.balance_moves({"gte": cut_off})]
        # Nothing moved while the balance was read: it holds exactly `after` beyond the cut-off.
        if before == after:
            for move in after:
                balance[move.currency] = balance.get(move.currency, 0) - move.net
            return Balance(datetime.fromtimestamp(cut_off, UTC), balance)
    return None


class Moves(NamedTuple):
    """A window's balance transactions, summed, and the fees on settle's own among them."""

    summed: list[BalanceMove]  # one line per type, currency and scope (settle's or not)
    fees: list[BalanceMove]  # each of settle's moves on which the rail kept a fee


async def moves_between(
    pool: asyncpg.Pool, rail: RailSource, start: datetime, end: datetime
) -> Moves:
    """The balance transactions created in [start, end), each read as settle's or another's,
    summed per type, currency and scope (so a window of any size is held as a few lines)."""
    created = {"gte": math.floor(start.timestamp()), "lt": math.floor(end.timestamp())}
    totals: dict[tuple[str, str, bool], tuple[int, int]] = {}
    fees: list[BalanceMove] = []
    page: list[BalanceMove] = []
    async for move in rail.balance_moves(created):
        page.append(move)
        if len(page) == PAGE_SIZE:
            _add(await scoped(pool, page), totals, fees)
            page = []
    _add(await scoped(pool, page), totals, fees)
    summed = [
        BalanceMove(f"{kind}:{currency}", kind, amount, currency, created["gte"], fee, ours=ours)
        for (kind, currency, ours), (amount, fee) in sorted(totals.items())
    ]
    return Moves(summed, fees)


async def scoped(pool: asyncpg.Pool, moves: list[BalanceMove]) -> list[BalanceMove]:
    """`moves`, each marked settle's (`ours`, with its settlement) or not: its source carries
    settle's mark, or a settlement claims the source (or the transfer a reversal reversed)
    as its rail reference."""
    unmarked = [_object_of(m) for m in moves if m.settlement_id is None]
    claims = await ledger_source.claims_of(pool, (o for o in unmarked if o is not None))
    found = []
    for move in moves:
        named = move.settlement_id or claims.get(_object_of(move) or "")
        found.append(move._replace(settlement_id=named, ours=named is not None))
    return found


def fee_charge(move: BalanceMove) -> RailCharge:
    """The fee the rail kept on one of settle's moves, as a charge booked once by its id."""
    charged_at = datetime.fromtimestamp(move.created, UTC)
    return RailCharge(
        FEE_RAIL,
        move.move_id,
        move.fee,
        move.currency,
        charged_at.date(),
        move.settlement_id,
        charged_at,
    )


def _object_of(move: BalanceMove) -> str | None:
    return move.reverses or move.source


def _add(
    moves: list[BalanceMove],
    totals: dict[tuple[str, str, bool], tuple[int, int]],
    fees: list[BalanceMove],
) -> None:
    for move in moves:
        key = (move.move_type, move.currency, move.ours)
        amount, fee = totals.get(key, (0, 0))
        totals[key] = (amount + move.amount, fee + move.fee)
        if move.ours and move.fee:
            fees.append(move)
