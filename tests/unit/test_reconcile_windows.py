"""A reconciliation run's window: intraday since the last completed run with its overlap, the
last hour when none completed, a whole UTC day for end of day; and the exit status a run ends
with."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from services.commands.reconcile_output import exit_status, print_text, run_document
from services.domain.breaks import BreakStatus, BreakType
from services.domain.reconciliation import Break, RunKind, RunStatus
from services.reconcile.outcome import Outcome
from services.reconcile.store import stored_key
from services.reconcile.windows import DEFAULT_OVERLAP, end_of_day, intraday

NOW = datetime(2026, 3, 4, 12, 30, 15, 500_000, tzinfo=UTC)


def test_intraday_starts_at_the_last_completed_end_less_the_overlap() -> None:
    last = NOW - timedelta(minutes=20)
    window = intraday(last, NOW)
    assert window == (RunKind.INTRADAY, last - DEFAULT_OVERLAP, NOW)
    assert timedelta(minutes=5) == DEFAULT_OVERLAP


def test_intraday_without_a_completed_run_covers_the_last_hour() -> None:
    assert intraday(None, NOW) == (RunKind.INTRADAY, NOW - timedelta(hours=1), NOW)


def test_intraday_after_a_run_ending_in_the_future_is_empty_not_inverted() -> None:
    window = intraday(NOW + timedelta(hours=1), NOW)
    assert window.start == window.end == NOW


def test_intraday_refuses_a_naive_clock() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        intraday(None, NOW.replace(tzinfo=None))


def test_end_of_day_is_the_whole_utc_day() -> None:
    window = end_of_day(date(2026, 3, 4))
    assert window == (
        RunKind.END_OF_DAY,
        datetime(2026, 3, 4, tzinfo=UTC),
        datetime(2026, 3, 5, tzinfo=UTC),
    )
    assert window.seconds() == (1772582400, 1772668800)


def test_the_rail_window_covers_every_second_the_window_touches() -> None:
    # The rail stamps whole seconds: an object made in the run's last second is inside.
    start, end = intraday(None, NOW).seconds()
    assert (start, end) == (int(NOW.timestamp()) - 3600, int(NOW.timestamp()) + 1)


FOUND = Break(BreakType.UNKNOWN_AT_RAIL, None, "tr_x", "settlement_id", None, None, None, "EUR")


def outcome(status: RunStatus, *found: Break, stored: BreakStatus | None = None) -> Outcome:
    done = Outcome(7, intraday(None, NOW), status, breaks=list(found))
    if stored is not None:
        done.stored = {stored_key(b): stored for b in found}
    return done


def test_a_completed_run_without_breaks_exits_0_and_is_ok() -> None:
    done = outcome(RunStatus.COMPLETED)
    assert exit_status(done) == 0
    assert run_document(done)["ok"] is True


def test_an_open_break_exits_1_with_its_ids_and_status() -> None:
    done = outcome(RunStatus.COMPLETED, FOUND, FOUND)
    assert exit_status(done) == 1
    document = run_document(done)
    assert document["ok"] is False
    assert document["counts"]["unknown_at_rail"] == 1
    assert [(b["type"], b["rail_object_id"], b["status"]) for b in document["breaks"]] == [
        ("unknown_at_rail", "tr_x", "open")
    ]


@pytest.mark.parametrize("closed", [BreakStatus.HEALED, BreakStatus.RESOLVED])
def test_a_break_found_again_after_it_was_closed_does_not_fail_the_run(
    closed: BreakStatus,
) -> None:
    done = outcome(RunStatus.COMPLETED, FOUND, stored=closed)
    assert exit_status(done) == 0
    assert run_document(done)["breaks"][0]["status"] == closed.value


def test_a_failed_run_exits_2_even_without_breaks() -> None:
    done = outcome(RunStatus.FAILED)
    assert exit_status(done) == 2
    assert run_document(done)["ok"] is False


def test_the_text_report_names_each_break_and_its_closed_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_text(outcome(RunStatus.COMPLETED, FOUND, stored=BreakStatus.RESOLVED))
    lines = capsys.readouterr().out.splitlines()
    assert "completed, 0 open break(s), 0 pending" in lines[0]
    assert lines[1].split()[:3] == ["unknown_at_rail", "[resolved]", "settlement=None"]
    assert "rail=tr_x" in lines[1]
