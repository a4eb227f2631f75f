"""Which months `settle archive` takes: `YYYY-MM` read strictly, partitions read by name, and
only months strictly before the one given."""

from __future__ import annotations

from datetime import date

import pytest

from services.operations.archive import month_of, months_before, next_month, parse_month


def test_a_month_is_read_as_yyyy_mm_only() -> None:
    assert parse_month("2019-03") == date(2019, 3, 1)
    for bad in ("2019-3", "2019-13", "2019-00", "201903", "2019-03-01", " 2019-03"):
        with pytest.raises(ValueError, match="YYYY-MM"):
            parse_month(bad)


def test_the_month_after_december_is_january_of_the_next_year() -> None:
    assert next_month(date(2019, 12, 1)) == date(2020, 1, 1)
    assert next_month(date(2019, 1, 1)) == date(2019, 2, 1)


def test_months_before_take_history_partitions_older_than_the_month_oldest_first() -> None:
    names = [
        "postings_y2019m03",
        "settlement_transitions_y2019m01",
        "operator_actions_y2019m03",
        "postings_y2019m04",
        "postings_y2020m01",
        "postings_pkey",
    ]
    assert month_of("postings_pkey") is None
    assert months_before(names, date(2019, 4, 1)) == [date(2019, 1, 1), date(2019, 3, 1)]
    assert months_before(names, date(2019, 1, 1)) == []
