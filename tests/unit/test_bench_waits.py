"""The e2e bench's wait sampling (tools/bench/e2e_waits.py): each wait event reported as the
sessions busy with it on average over the samples, the most seen first, nothing when no
sample was taken."""

from __future__ import annotations

from collections import Counter

from tools.bench.e2e_waits import SHOWN, Waits


def test_each_wait_is_the_average_number_of_sessions_busy_with_it() -> None:
    waits = Waits()
    waits.seen = Counter({"CPU": 30, "IO:WALSync": 10, "Lock:object": 5})
    waits.samples = 20
    figures = waits.figures("500/s")
    assert [(f.name, f.value) for f in figures] == [
        ("500/s pg sessions CPU", 1.5),
        ("500/s pg sessions IO:WALSync", 0.5),
        ("500/s pg sessions Lock:object", 0.25),
    ]


def test_only_the_most_seen_are_named_and_no_sample_reports_nothing() -> None:
    waits = Waits()
    assert waits.figures("100/s") == []
    waits.seen = Counter({f"Lock:{n}": n + 1 for n in range(SHOWN + 3)})
    waits.samples = 1
    assert len(waits.figures("100/s")) == SHOWN
