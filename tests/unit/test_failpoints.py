"""Failpoint specs: what parses, which hits fire, and that a bad spec is refused rather than
ignored."""

from __future__ import annotations

import signal

import pytest

from services.platform.failpoints import FailpointSpecError, parse


def test_points_parse_with_their_hit_and_delay() -> None:
    points = parse("dispatch.after_accept=kill@5, dispatch.during_call=kill-in:0.25@2")
    assert (points["dispatch.after_accept"].nth, points["dispatch.after_accept"].delay) == (5, None)
    assert (points["dispatch.during_call"].nth, points["dispatch.during_call"].delay) == (2, 0.25)
    assert points["dispatch.after_accept"].signal == signal.SIGKILL


def test_stop_freezes_the_process_instead_of_killing_it() -> None:
    assert parse("rail.before_write=stop@3")["rail.before_write"].signal == signal.SIGSTOP


def fired(spec: str, hits: int) -> list[int]:
    point = next(iter(parse(spec).values()))
    out = []
    for hit in range(1, hits + 1):
        point.hits = hit
        if point.fires():
            out.append(hit)
    return out


def test_a_point_fires_once_on_its_hit() -> None:
    assert fired("x=stop@4", 20) == [4]


def test_a_repeating_point_fires_on_its_hit_then_every_nth_after() -> None:
    assert fired("x=stop@4+5", 20) == [4, 9, 14, 19]


def test_empty_spec_names_nothing() -> None:
    assert parse("") == {}


@pytest.mark.parametrize(
    "spec",
    ["x=kill", "x=explode@1", "x=kill@0", "=kill@1", "x=kill-in:@1", "x=stop@1+0", "x=stop@1+"],
)
def test_a_bad_spec_is_refused(spec: str) -> None:
    with pytest.raises(FailpointSpecError):
        parse(spec)
