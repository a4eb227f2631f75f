"""Matching a rail event to what its settlement sent: each field that can differ is caught
with both sides, the rail's own events (simulator and Stripe's shape) match, and the event
body is read into what it reports without a float ever standing for money."""

from __future__ import annotations

import orjson
import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.params import Kind
from services.domain.webhook_match import (
    Difference,
    Reported,
    Sent,
    describe,
    differences,
)
from services.inbox.events import parse_event, stored_event_facts

SENT = Sent(amount=900, currency="USD", destination="acct_1Q2w3E", rail_reference="tr_1")
SAME = Reported("tr_1", 900, "usd", "acct_1Q2w3E", None)


def test_an_event_about_what_was_sent_matches() -> None:
    assert differences(SENT, SAME) == ()
    # Before the relay recorded the rail's answer, any object may be the one it sent.
    assert differences(SENT._replace(rail_reference=None), SAME._replace(object_id="tr_9")) == ()
    # A reversal of part or all of what was sent.
    assert differences(SENT, SAME._replace(amount_reversed=900)) == ()


@pytest.mark.parametrize(
    ("reported", "field", "expected", "received"),
    [
        (SAME._replace(amount=901), "amount", 900, 901),
        (SAME._replace(amount="900"), "amount", 900, "900"),
        (SAME._replace(amount=True), "amount", 900, True),
        (SAME._replace(amount=None), "amount", 900, None),
        (SAME._replace(currency="eur"), "currency", "USD", "eur"),
        (SAME._replace(currency=None), "currency", "USD", None),
        (SAME._replace(destination="acct_other"), "destination", "acct_1Q2w3E", "acct_other"),
        (SAME._replace(destination=None), "destination", "acct_1Q2w3E", None),
        (SAME._replace(account="acct_1Q2w3E"), "account", None, "acct_1Q2w3E"),
        (SAME._replace(object_id="tr_2"), "object", "tr_1", "tr_2"),
        (SAME._replace(amount_reversed=901), "amount_reversed", 900, 901),
    ],
)
def test_each_field_that_differs_is_a_difference_with_both_sides(
    reported: Reported, field: str, expected: object, received: object
) -> None:
    assert differences(SENT, reported) == (Difference(field, expected, received),)


def test_true_is_not_an_amount_of_one() -> None:
    one = SENT._replace(amount=1)
    assert differences(one, SAME._replace(amount=True)) == (Difference("amount", 1, True),)


def test_every_differing_field_is_listed_in_a_fixed_order_and_described() -> None:
    forged = Reported("tr_2", 1, "eur", "acct_x", "acct_x", 5)
    found = differences(SENT, forged)
    fields = [d.field for d in found]
    assert fields == ["object", "amount", "currency", "destination", "account"]
    reason = describe(found)
    assert "amount 1 (sent 900)" in reason and "account 'acct_x' (sent None)" in reason


def _event(obj: dict[str, object], **top: object) -> bytes:
    body = {"id": "evt_1", "type": "transfer.created", "created": 1, "data": {"object": obj}}
    return orjson.dumps({**body, **top})


def test_a_body_is_read_into_what_it_reports() -> None:
    obj = {"id": "tr_1", "amount": 900, "currency": "usd", "destination": "acct_1Q2w3E"}
    assert parse_event(_event(obj)).reported == SAME
    connected = parse_event(_event(obj, account="acct_9")).reported
    assert connected is not None and connected.account == "acct_9"
    # A float amount and an expanded destination are reported as nothing, never as money.
    odd = parse_event(_event({**obj, "amount": 900.0, "destination": {"id": "acct_1Q2w3E"}}))
    assert odd.reported is not None
    assert (odd.reported.amount, odd.reported.destination) == (None, None)
    assert differences(SENT, odd.reported) == (
        Difference("amount", 900, None),
        Difference("destination", "acct_1Q2w3E", None),
    )


def test_a_stored_body_that_no_longer_reads_reports_nothing() -> None:
    assert stored_event_facts(b"not json") == (None, None)


@pytest.mark.parametrize("kind", [Kind.TRANSFER, Kind.PAYOUT])
def test_the_simulators_events_match_what_the_relay_sent(kind: Kind) -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock)
    form = [
        ("amount", "900"),
        ("currency", "usd"),
        ("destination", "acct_1Q2w3E"),
        ("metadata[settlement_id]", "s-1"),
    ]
    reply = sim.create(kind, form, idempotency_key="k" * 64)
    clock.advance(3 * 86400)
    deliveries = [*reply.webhooks, *sim.take_webhooks()]
    assert deliveries
    for delivery in deliveries:
        event = parse_event(delivery.payload)
        assert event.reported is not None
        sent = SENT._replace(rail_reference=event.object_id)
        assert differences(sent, event.reported) == (), delivery.event_type


# Stripe's own rendering of the platform's events (API reference shapes): no `account`, the
# object as the API returns it.
STRIPE_TRANSFER = {
    "id": "tr_1",
    "object": "transfer",
    "amount": 900,
    "amount_reversed": 0,
    "balance_transaction": "txn_1",
    "created": 1,
    "currency": "usd",
    "description": None,
    "destination": "acct_1Q2w3E",
    "destination_payment": "py_1",
    "livemode": False,
    "metadata": {"settlement_id": "s-1", "tenant": "acme"},
    "reversed": False,
    "source_transaction": None,
    "source_type": "card",
    "transfer_group": "s-1",
    "reversals": {
        "object": "list",
        "data": [],
        "has_more": False,
        "total_count": 0,
        "url": "/v1/transfers/tr_1/reversals",
    },
}
STRIPE_PAYOUT = {
    "id": "po_1",
    "object": "payout",
    "amount": 900,
    "arrival_date": 2,
    "automatic": False,
    "balance_transaction": "txn_1",
    "created": 1,
    "currency": "usd",
    "description": None,
    "destination": "ba_1Q2w3E",
    "failure_balance_transaction": None,
    "failure_code": None,
    "failure_message": None,
    "livemode": False,
    "metadata": {"settlement_id": "s-1"},
    "method": "standard",
    "source_type": "card",
    "statement_descriptor": None,
    "status": "paid",
    "type": "bank_account",
}


@pytest.mark.parametrize(
    ("event_type", "obj"),
    [
        ("transfer.created", STRIPE_TRANSFER),
        ("payout.paid", STRIPE_PAYOUT),
        ("transfer.reversed", {**STRIPE_TRANSFER, "amount_reversed": 300}),
    ],
)
def test_stripes_own_events_of_the_platform_match_what_was_sent(
    event_type: str, obj: dict[str, object]
) -> None:
    body = {
        "id": "evt_1",
        "object": "event",
        "api_version": "2024-06-20",
        "created": 1,
        "data": {"object": obj},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": "req_1", "idempotency_key": "k"},
        "type": event_type,
    }
    # A transfer goes to the connected account, a payout to the platform's bank account.
    sent = SENT._replace(rail_reference=obj["id"], destination=obj["destination"])
    reported = parse_event(orjson.dumps(body)).reported
    assert reported is not None and differences(sent, reported) == ()
    # The same event from a connected account's own books is not ours.
    connected = parse_event(orjson.dumps({**body, "account": "acct_1Q2w3E"})).reported
    assert connected is not None
    assert differences(sent, connected) == (Difference("account", None, "acct_1Q2w3E"),)
