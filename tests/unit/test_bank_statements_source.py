"""The bank's records as reconciliation reads them: the intraday camt.054 notifications count
for the days no statement covers yet, once each however often they are delivered, and give
way to the day's statement once it comes; the records run to the last day a statement closed."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from services.adapters.sepa.camt053 import Statement, read_camt053
from services.adapters.sepa.camt054 import Notification, read_camt054
from services.reconcile.bank_continuity import statement_gaps
from services.reconcile.bank_source import BankStatements

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sepa"
BATCH = ("018f3c2a7b4e7c1d9a2b3c4d5e6f7083", "018f3c2a7b4e7c1d9a2b3c4d5e6f7084")
RETURNED = "018f3c2a7b4e7c1d9a2b3c4d5e6f7079"
DAY = date(2026, 3, 2)  # the notifications' booking day, and the 001.08 statement's


def notifications() -> list[Notification]:
    return list(read_camt054((FIXTURES / "camt.054.001.08.xml").read_bytes()).notifications)


def statements(name: str) -> list[Statement]:
    return list(read_camt053((FIXTURES / f"{name}.xml").read_bytes()).statements)


def debited(source: BankStatements) -> dict[str, tuple[int, int]]:
    return {o.object_id: (o.amount, o.amount_reversed) for o in source.objects.values()}


def test_before_any_statement_the_notifications_are_the_banks_record_of_the_day() -> None:
    read = BankStatements("bank", [], notifications())
    assert debited(read) == {BATCH[0]: (10_000, 0), BATCH[1]: (5_000, 0)}
    assert read.booked_through() is None  # no day closed: the bank may book more on it
    assert read.tally.notifications == 1
    assert read.window(datetime(2026, 3, 1, tzinfo=UTC)).start.date() == DAY
    assert read.window(datetime(2026, 3, 1, tzinfo=UTC)).end.date() == date(2026, 3, 3)
    # A file reaches no further than its days; the bank itself, to now.
    assert read.window(datetime(2026, 3, 9, tzinfo=UTC)).end.date() == date(2026, 3, 3)
    live = BankStatements("bank", [], notifications(), live=True)
    assert live.window(datetime(2026, 3, 9, tzinfo=UTC)).end.date() == date(2026, 3, 9)


def test_a_notification_delivered_twice_debits_nothing_twice() -> None:
    twice = [*notifications(), dataclasses.replace(notifications()[0], notification_id="again")]
    assert debited(BankStatements("bank", [], twice)) == {
        BATCH[0]: (10_000, 0),
        BATCH[1]: (5_000, 0),
    }


def test_the_days_statement_replaces_its_notifications() -> None:
    alone = BankStatements("bank", statements("camt.053.001.08"))
    both = BankStatements("bank", statements("camt.053.001.08"), notifications())
    assert debited(both) == debited(alone)
    assert both.tally.entries == alone.tally.entries
    assert both.booked_through() == DAY


def test_notifications_past_the_last_statement_add_their_day() -> None:
    earlier = [
        dataclasses.replace(
            st,
            closing=dataclasses.replace(st.closing, day=date(2026, 3, 1)),
            entries=(),
        )
        for st in statements("camt.053.001.08")
    ]
    read = BankStatements("bank", earlier, notifications())
    assert set(debited(read)) == set(BATCH)
    assert read.booked_through() == date(2026, 3, 1)
    assert RETURNED not in debited(read)  # a return counts against a debit; it is none


def test_statements_that_do_not_follow_each_other_are_gaps() -> None:
    (day,) = statements("camt.053.001.08")
    electronic, legal = day.electronic_sequence or 0, day.legal_sequence or 0
    assert electronic and legal

    def gaps(**changes: Any) -> list[tuple[str, int | None]]:
        follows = {
            "electronic_sequence": electronic + 1,
            "legal_sequence": legal + 1,
            "opening": day.closing,
            "closing": day.closing,
            "entries": (),
        }
        nxt = dataclasses.replace(day, **{**follows, **changes})
        return [(b.field, b.difference) for b in statement_gaps([day, nxt])]

    assert gaps() == []
    assert gaps(electronic_sequence=electronic + 3) == [("electronic_sequence", 2)]
    assert gaps(legal_sequence=legal + 2) == [("legal_sequence", 1)]
    new_year = dataclasses.replace(day.closing, day=date(day.closing.day.year + 1, 1, 2))
    assert gaps(legal_sequence=1, closing=new_year) == []  # the legal one restarts
    moved = dataclasses.replace(day.closing, amount=day.closing.amount + 5)
    assert gaps(opening=moved, closing=moved) == [("opening", 5)]
