"""StripeRail.find: looking a settlement up at Stripe by our metadata, before any re-issue."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from services.adapters.stripe.rail import RailLookupFailed, RailLookupIncomplete
from services.domain.payout import PayoutMethod
from tests.unit.test_stripe_rail import (
    NOW,
    SHORT,
    Break,
    Handler,
    Reply,
    Seen,
    answer,
    fail,
    fake_stripe,
    instruction,
)


def item(id_: str, settlement_id: str | None) -> dict[str, object]:
    """A listed transfer or payout whose metadata names `settlement_id` (or nothing)."""
    metadata = {"settlement_id": settlement_id, "tenant": "acme"} if settlement_id else {}
    return {"id": id_, "metadata": metadata}


def page(*items: dict[str, object], has_more: bool = False) -> dict[str, object]:
    """One page of a Stripe list."""
    return {"object": "list", "url": "/v1/x", "data": list(items), "has_more": has_more}


def pages(*bodies: dict[str, object]) -> Handler:
    """A handler answering successive list requests with successive pages."""
    remaining = list(bodies)

    async def handle(request: Seen) -> Reply:
        body = json.dumps(remaining.pop(0)).encode()
        return Reply(200, body, {"Content-Type": "application/json"})

    return handle


async def test_a_transfer_is_found_by_group_and_matched_on_metadata() -> None:
    listed = page(item("tr_other", "stl_0"), item("tr_bare", None), item("tr_9", "stl_1"))
    async with fake_stripe(pages(listed)) as fake:
        rail = fake.rail()
        found = await rail.find(instruction())
        await rail.aclose()

    assert found == "tr_9"
    [request] = fake.requests
    assert (request.method, request.path) == ("GET", "/v1/transfers")
    assert request.params == {"transfer_group": "stl_1", "limit": "10"}


async def test_no_matching_transfer_is_none() -> None:
    # Same transfer group but no metadata naming us: not ours to adopt.
    async with fake_stripe(pages(page(item("tr_bare", None)))) as fake:
        rail = fake.rail()
        found = await rail.find(instruction())
        await rail.aclose()

    assert found is None


async def test_payouts_are_paged_from_the_lookback_until_a_match() -> None:
    answers = pages(
        page(item("po_3", "stl_x"), item("po_2", None), has_more=True),
        page(item("po_1", "stl_1"), has_more=True),
    )
    async with fake_stripe(answers) as fake:
        rail = fake.rail()
        found = await rail.find(instruction(PayoutMethod.PAYOUT, destination="ba_9"))
        await rail.aclose()

    assert found == "po_1"
    first, second = fake.requests
    week_ago = str(int((NOW - timedelta(days=7)).timestamp()))
    assert first.path == "/v1/payouts"
    assert first.params == {
        "created[gte]": week_ago,
        "destination": "ba_9",
        "limit": "100",
    }
    assert second.params == {
        "created[gte]": week_ago,
        "destination": "ba_9",
        "limit": "100",
        "starting_after": "po_2",
    }


async def test_find_all_reads_every_page_and_keeps_every_match() -> None:
    answers = pages(
        page(item("po_3", "stl_1"), item("po_2", None), has_more=True),
        page(item("po_1", "stl_1"), item("po_0", "stl_x")),
    )
    async with fake_stripe(answers) as fake:
        rail = fake.rail()
        found = await rail.find_all(instruction(PayoutMethod.PAYOUT, destination="ba_9"))
        await rail.aclose()

    assert found == ["po_3", "po_1"]
    assert len(fake.requests) == 2


async def test_payouts_are_searched_from_the_bound_given() -> None:
    async with fake_stripe(pages(page())) as fake:
        rail = fake.rail()
        since = datetime(2026, 11, 1, tzinfo=UTC)
        found = await rail.find(instruction(PayoutMethod.PAYOUT), since=since)
        await rail.aclose()

    assert found is None
    [request] = fake.requests
    assert request.params["created[gte]"] == str(int(since.timestamp()))


async def test_running_out_of_pages_is_not_proof_of_absence() -> None:
    endless = pages(*[page(item(f"po_{n}", None), has_more=True) for n in range(3)])
    async with fake_stripe(endless) as fake:
        rail = fake.rail(max_pages=2)
        with pytest.raises(RailLookupIncomplete) as caught:
            await rail.find(instruction(PayoutMethod.PAYOUT))
        await rail.aclose()

    assert caught.value.retriable is False
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    "handler",
    [
        answer(500, {"error": {"type": "api_error"}}),
        answer(429, {"error": {"type": "invalid_request_error", "code": "rate_limit"}}),
        answer(401, {"error": {"type": "invalid_request_error"}}),
        answer(200, {"object": "list", "data": [item("tr_1", None)]}),  # no has_more
        answer(200, {"object": "list", "data": None, "has_more": False}),
        None,  # nothing listens
        fail(Break.HANG),
    ],
    ids=["500", "429", "401", "no-has-more", "no-data", "connect-error", "read-timeout"],
)
async def test_a_failed_lookup_raises_instead_of_saying_not_found(handler: Handler | None) -> None:
    async with fake_stripe(handler) as fake:
        rail = fake.rail(timeout=SHORT)
        with pytest.raises(RailLookupFailed) as caught:
            await rail.find(instruction())
        await rail.aclose()

    assert caught.value.retriable is True
    assert caught.value.settlement_id == "stl_1"
