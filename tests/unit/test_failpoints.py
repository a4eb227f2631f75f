"""Failpoint specs: what parses, and that a bad spec is refused rather than ignored."""

from __future__ import annotations

import pytest

from services.shared.failpoints import FailpointSpecError, parse


def test_points_parse_with_their_hit_and_delay() -> None:
    points = parse("dispatch.after_accept=kill@5, dispatch.during_call=kill-in:0.25@2")
    assert (points["dispatch.after_accept"].nth, points["dispatch.after_accept"].delay) == (5, None)
    assert (points["dispatch.during_call"].nth, points["dispatch.during_call"].delay) == (2, 0.25)


def test_empty_spec_names_nothing() -> None:
    assert parse("") == {}


@pytest.mark.parametrize("spec", ["x=kill", "x=explode@1", "x=kill@0", "=kill@1", "x=kill-in:@1"])
def test_a_bad_spec_is_refused(spec: str) -> None:
    with pytest.raises(FailpointSpecError):
        parse(spec)
