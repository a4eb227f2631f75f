"""A bank report read as rail events: rejections, bookings (batch entries by their
transactions) and returns with their reasons; charges, pending entries and statuses that
decide nothing are left out, and every event reads as the inbox reads a webhook."""

from __future__ import annotations

from pathlib import Path

import orjson

from services.adapters.sepa.reports import read_report
from services.domain.rail_event import Signal, signal_for
from services.inbox.bank_events import (
    BOOKED,
    REJECTED,
    RETURNED,
    Decided,
    SentTransfer,
    decided_in,
    event_bodies,
)
from services.inbox.events import parse_event

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sepa"
E2E = "018f3c2a7b4e7c1d9a2b3c4d5e6f70{:02d}"
IBAN = "FR1420041010050500013M02606"


def decided(name: str, files: dict[str, list[str]] | None = None) -> list[Decided]:
    return decided_in(read_report((FIXTURES / name).read_bytes()), files or {})


def test_a_status_report_rejects_transactions_with_their_reasons() -> None:
    assert decided("pain.002.001.10.xml") == [
        Decided(E2E.format(81), REJECTED, "RJCT-AC04"),
        Decided(E2E.format(82), REJECTED, "RJCT-AM04"),
    ]


def test_a_group_rejected_whole_rejects_every_transfer_of_our_file() -> None:
    ours = {"SETTLE-99aa88bb77cc66dd55ee44ff3300": [E2E.format(90), E2E.format(91)]}
    assert decided("pain.002.001.03.xml", ours) == [
        Decided(E2E.format(90), REJECTED, "RJCT-FF01"),
        Decided(E2E.format(91), REJECTED, "RJCT-FF01"),
    ]
    assert decided("pain.002.001.03.xml") == []  # not a file of ours: nothing to decide


def test_entries_book_each_transfer_of_a_batch_and_return_by_the_original_id() -> None:
    expected = [
        Decided(E2E.format(83), BOOKED, "BOOK", 10000),
        Decided(E2E.format(84), BOOKED, "BOOK", 5000),
        Decided(E2E.format(79), RETURNED, "RRTN-AC04", returned=2550),
    ]
    assert decided("camt.054.001.08.xml") == expected
    assert decided("camt.053.001.08.xml") == expected  # charges and PDNG decide nothing
    assert decided("camt.053.001.02.xml") == [
        Decided(E2E.format(86), BOOKED, "BOOK", 8000),
        Decided(E2E.format(86), RETURNED, "RRTN-MS03", returned=8000),
    ]


def test_each_decision_is_an_event_the_inbox_reads_like_a_webhook() -> None:
    sent = {E2E.format(83): SentTransfer(10000, IBAN), E2E.format(79): SentTransfer(2550, IBAN)}
    report = [*decided("camt.054.001.08.xml"), Decided("not-ours", BOOKED, "BOOK", 1)]
    bodies = event_bodies("camt.054", "NTF-7", report, sent, 1_790_000_000)
    events = [parse_event(body) for body in bodies]
    assert [e.event_type for e in events] == [BOOKED, BOOKED, RETURNED]  # not ours: left out
    booked, unsent, returned = events
    assert booked.event_id == f"camt.054/NTF-7/{E2E.format(83)}/BOOK"
    assert booked.object_id == E2E.format(83)
    assert str(booked.settlement_id).replace("-", "") == E2E.format(83)
    assert booked.reported is not None
    assert (booked.reported.amount, booked.reported.destination) == (10000, IBAN)
    assert unsent.reported is not None and unsent.reported.destination is None
    assert signal_for(returned.event_type, returned.amount_reversed) is Signal.REVERSED
    assert returned.amount_reversed == 2550
    assert "RRTN-AC04" in returned.event_id
    # A rejection states no amount: what was sent stands in for it.
    (rejection,) = event_bodies(
        "pain.002", "STS-1", [Decided(E2E.format(83), REJECTED, "RJCT-AC04")], sent, 0
    )
    obj = orjson.loads(rejection)["data"]["object"]
    assert (obj["amount"], obj["currency"], obj["destination"]) == (10000, "EUR", IBAN)
