"""The end of a business day: a camt.053 statement for every open account.

Each statement opens at the previous one's closing balance (the opening balance, for an
account's first), closes at that plus the day's credits minus its debits, and must agree with
the running balance the bookings kept, or the simulator stops loudly. ElctrncSeqNb runs on
from 1 per account; LglSeqNb restarts at 1 with each calendar year. The fault profile may
deliver a statement a day late, or hold it back K days so later ones overtake it.
"""

from __future__ import annotations

import functools
import sqlite3
from datetime import date

from banksim.camt import Day, statement
from banksim.clock import end_of
from banksim.errors import BooksUnbalanced
from banksim.faults import Faults
from banksim.ledger import entries_on
from banksim.outcomes import statement_delay
from banksim.reports import issue
from services.domain.business_days import add_business_days


def close_day(db: sqlite3.Connection, day: date, faults: Faults) -> None:
    """Issue the statement of `day` for every account open by then."""
    accounts = db.execute(
        "SELECT iban, balance_minor, closing_minor, electronic_seq, legal_year, legal_seq"
        " FROM accounts WHERE opened_on <= ? AND (statement_through IS NULL"
        " OR statement_through < ?) ORDER BY iban",
        (day.isoformat(), day.isoformat()),
    ).fetchall()
    for iban, balance, opening, electronic, legal_year, legal_seq in accounts:
        entries = entries_on(db, iban, day)
        credits = sum(e.amount_minor for e in entries if e.credit)
        debits = sum(e.amount_minor for e in entries if not e.credit)
        closing = opening + credits - debits
        if closing != balance:
            raise BooksUnbalanced(
                f"{iban} on {day}: closing {closing} is not the running balance {balance}"
            )
        legal = legal_seq + 1 if legal_year == day.year else 1
        summary = Day(iban, day, electronic + 1, legal, opening, closing)
        delay = statement_delay(iban, day, faults)
        at = end_of(day)
        issue(
            db,
            "camt.053",
            day,
            at,
            functools.partial(statement, at=at, day=summary, entries=entries),
            due=add_business_days(day, 1 + delay.days),
            held_back=delay.held_back,
        )
        moved = db.execute(
            "UPDATE accounts SET closing_minor = ?, statement_through = ?, electronic_seq = ?,"
            " legal_year = ?, legal_seq = ? WHERE iban = ? AND electronic_seq = ?",
            (closing, day.isoformat(), electronic + 1, day.year, legal, iban, electronic),
        )
        assert moved.rowcount == 1, iban
