"""The books balance whatever mix of settlements arrives at once: a hypothesis property over
random batches (duplicate keys, replays and duplicate references mixed in) accepted
concurrently through a real Ledger on the real PostgreSQL.

Hypothesis drives a sync test; each example runs its async body with `asyncio.run`, in a
fresh event loop with an asyncpg pool of its own. The session's loop (pytest-asyncio, session
scope) is not running between tests, so it is neither needed nor disturbed.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from services.ledger.acceptor import Ledger
from services.ledger.booking import Books, Windows
from services.ledger.intake import parse_settlement_body
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from tests.conftest import asyncpg_dsn, unique

pytestmark = pytest.mark.integration

WINDOWS = Windows(replay=timedelta(hours=24), tombstone=timedelta(hours=24))
CURRENCIES = ("USD", "EUR", "JPY")
# Small id spaces, so keys and references collide within a tenant.
KEYS = 8
REFERENCES = 8


@dataclass(frozen=True)
class Ask:
    """One request, in indices the example maps to its own fresh tenants, keys, references."""

    tenant: int
    key: int
    reference: int
    amount: int
    currency: str


@dataclass(frozen=True)
class Scenario:
    tenants: int
    asks: list[Ask]
    max_batch: int  # the Ledger's
    workers: int  # the Ledger's
    polls: int  # lists booked through accept_many (Kafka's path); 0: all via accept


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    tenants = draw(st.integers(2, 3))
    asks = st.builds(
        Ask,
        tenant=st.integers(0, tenants - 1),
        key=st.integers(0, KEYS - 1),
        reference=st.integers(0, REFERENCES - 1),
        amount=st.integers(1, 10**12),
        currency=st.sampled_from(CURRENCIES),
    )
    base = draw(st.lists(asks, min_size=4, max_size=30))
    # Exact retries of some requests: same key, same body.
    retries = draw(st.lists(st.sampled_from(base), max_size=12))
    order = draw(st.permutations(base + retries))
    # Small batches and several workers put one key or reference in concurrent
    # transactions; large batches fold them inside one.
    max_batch = draw(st.sampled_from([1, 3, 200]))
    workers = draw(st.sampled_from([1, 4, 8]))
    # Some requests arrive as Kafka polls do: whole lists booked by `accept_many` in the
    # caller's task, concurrently with the workers' batches.
    polls = draw(st.sampled_from([0, 1, 3]))
    return Scenario(tenants, order, max_batch, workers, polls)


def build(tenants: list[str], ask: Ask) -> SettlementRequest:
    body = {
        "reference": f"ref-{ask.reference}",
        "payee": f"payee-{ask.reference}",
        "destination": "acct_1Q2w3E",
        "amount": ask.amount,
        "currency": ask.currency,
    }
    return parse_settlement_body(tenants[ask.tenant], f"key-{ask.key}", json.dumps(body).encode())


async def accept_and_check(dsn: str, scenario: Scenario) -> None:
    tenants = [unique("p") for _ in range(scenario.tenants)]
    requests = [build(tenants, ask) for ask in scenario.asks]
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=8)
    try:
        ledger = Ledger(
            pool, Books(WINDOWS), workers=scenario.workers, max_batch=scenario.max_batch
        )
        try:
            results = await accept_concurrently(ledger, requests, scenario.polls)
        finally:
            await ledger.stop()
        await check_books(pool, tenants, requests, results)
    finally:
        await pool.close()


async def accept_concurrently(
    ledger: Ledger, requests: list[SettlementRequest], polls: int
) -> list[AcceptResult]:
    """All of `requests` at once, results in request order: with `polls`, every other request
    goes into one of `polls` lists booked by accept_many, the rest one by one via accept."""
    many = [n for n in range(len(requests)) if polls and n % 2 == 0]
    single = [n for n in range(len(requests)) if not polls or n % 2]
    lists = [many[p::polls] for p in range(polls)]
    one_by_one = asyncio.gather(*(ledger.accept(requests[n]) for n in single))
    in_lists = asyncio.gather(*(ledger.accept_many([requests[n] for n in ns]) for ns in lists))
    singles, listed = await asyncio.gather(one_by_one, in_lists)
    results = dict(zip(single, singles, strict=True))
    for ns, answers in zip(lists, listed, strict=True):
        results.update(zip(ns, answers, strict=True))
    return [results[n] for n in range(len(requests))]


async def check_books(
    pool: asyncpg.Pool,
    tenants: list[str],
    requests: list[SettlementRequest],
    results: list[AcceptResult],
) -> None:
    keys = await pool.fetch(
        "SELECT tenant, key, fingerprint, state FROM idempotency_keys WHERE tenant = ANY($1)",
        tenants,
    )
    settlements = await pool.fetch(
        "SELECT id, tenant, reference, idempotency_key, amount, currency FROM settlements"
        " WHERE tenant = ANY($1)",
        tenants,
    )
    accounts = await pool.fetch(
        """SELECT a.id, a.tenant, a.kind, a.currency,
                  (SELECT sum(b.balance) FROM account_balances b WHERE b.account_id = a.id)
                      AS stored,
                  (SELECT coalesce(sum(p.amount), 0) FROM postings p WHERE p.account_id = a.id)
                      AS posted
             FROM accounts a WHERE a.tenant = ANY($1)""",
        tenants,
    )
    unbalanced = await pool.fetch(
        """SELECT e.id, p.currency, sum(p.amount) AS total
             FROM journal_entries e JOIN postings p ON p.entry_id = e.id
            WHERE e.tenant = ANY($1)
            GROUP BY e.id, p.currency HAVING sum(p.amount) <> 0""",
        tenants,
    )
    entries = await pool.fetch(
        """SELECT e.settlement_id, e.kind, count(p.id) AS postings
             FROM journal_entries e LEFT JOIN postings p ON p.entry_id = e.id
            WHERE e.tenant = ANY($1) GROUP BY e.id""",
        tenants,
    )

    # The request that took each key is the one whose fingerprint the key stores.
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for n, r in enumerate(requests):
        groups[(r.tenant, r.idempotency_key)].append(n)
    stored_fp = {(k["tenant"], k["key"]): bytes(k["fingerprint"]) for k in keys}
    assert set(stored_fp) == set(groups)
    assert {k["state"] for k in keys} == {"completed"}
    winners: dict[tuple[str, str], SettlementRequest] = {}
    for group, members in groups.items():
        taken = [requests[n] for n in members if requests[n].fingerprint == stored_fp[group]]
        assert taken, f"key {group} stores a fingerprint none of its requests had"
        winners[group] = taken[0]
        answers = set()
        for n in members:
            result, request = results[n], requests[n]
            if result.outcome is Outcome.IN_USE:
                assert result.status == 409 and result.retry_after
                continue
            if request.fingerprint == stored_fp[group]:
                assert result.outcome in (
                    Outcome.CREATED,
                    Outcome.REPLAYED,
                    Outcome.DUPLICATE_REFERENCE,
                ), result
                answers.add((result.status, result.body))
            else:
                assert (result.outcome, result.status) == (Outcome.MISMATCH, 422), result
        # One answer per key, byte for byte, however many times it was asked.
        assert len(answers) <= 1, answers

    # Exactly the references the keys' first requests named were booked, each once, by one
    # of those requests, and each reported CREATED exactly once.
    booked = {(s["tenant"], s["reference"]): s for s in settlements}
    assert len(booked) == len(settlements)
    assert set(booked) == {(w.tenant, w.reference) for w in winners.values()}
    for (tenant, reference), s in booked.items():
        winner = winners[(tenant, s["idempotency_key"])]
        assert (winner.reference, winner.amount, winner.currency) == (
            reference,
            s["amount"],
            s["currency"],
        )
    created = [r for r in results if r.outcome is Outcome.CREATED]
    assert sorted(r.settlement_id or "" for r in created) == sorted(
        str(s["id"]) for s in settlements
    )

    # Books: every entry balances; every account's shards sum to its postings.
    assert unbalanced == []
    assert sorted(e["settlement_id"] for e in entries) == sorted(s["id"] for s in settlements)
    assert {(e["kind"], e["postings"]) for e in entries} <= {("accepted", 2)}
    for a in accounts:
        assert a["stored"] == a["posted"], dict(a)
    balance = {(a["tenant"], a["kind"], a["currency"]): int(a["stored"]) for a in accounts}
    for tenant in tenants:
        for currency in CURRENCIES:
            owed = sum(
                s["amount"]
                for s in settlements
                if (s["tenant"], s["currency"]) == (tenant, currency)
            )
            payable = balance.get((tenant, "payable", currency), 0)
            funding = balance.get((tenant, "funding", currency), 0)
            assert payable == owed == -funding, (tenant, currency, payable, owed, funding)


@settings(
    max_examples=15,
    deadline=None,
    # A failure costs a database round trip per example: shrink one failure, skip the
    # explain phase, so a broken ledger fails in seconds rather than minutes.
    report_multiple_bugs=False,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_books_balance_for_any_mix_of_concurrent_settlements(
    database_url: str, scenario: Scenario
) -> None:
    asyncio.run(accept_and_check(asyncpg_dsn(database_url), scenario))
