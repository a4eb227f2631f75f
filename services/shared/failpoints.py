"""Named crash points, so tests can SIGKILL a service at an exact step of its work.

A failpoint is a call `failpoint("dispatch.after_call")` placed between two steps whose
order matters for correctness. It does nothing unless `SETTLE_FAILPOINTS` names it:

    SETTLE_FAILPOINTS="dispatch.after_call=kill@5"       SIGKILL on the 5th time it is reached
    SETTLE_FAILPOINTS="dispatch.during_call=kill-in:0.2@3"  SIGKILL 0.2 s after the 3rd time,
                                                           whatever the process is doing then
    SETTLE_FAILPOINTS="a=kill@1,b=kill@2"                 several points

The kill is a real SIGKILL of the process itself: no `finally`, no flush, no goodbye, which
is what a power cut or the OOM killer does. Points are read from the environment once, at
import; with the variable unset every call is one dictionary lookup.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from dataclasses import dataclass

ENV = "SETTLE_FAILPOINTS"
_SPEC = re.compile(r"^(?P<name>[\w.]+)=(?P<action>kill|kill-in:(?P<delay>[\d.]+))@(?P<nth>\d+)$")


class FailpointSpecError(ValueError):
    """SETTLE_FAILPOINTS does not parse; the service refuses to start rather than ignore it."""


@dataclass(slots=True)
class _Point:
    nth: int  # fire on this hit (1-based)
    delay: float | None  # None: at once; else seconds after the hit
    hits: int = 0


def parse(spec: str) -> dict[str, _Point]:
    """The failpoints named by a SETTLE_FAILPOINTS value."""
    points: dict[str, _Point] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = _SPEC.match(part)
        if match is None or int(match["nth"]) < 1:
            raise FailpointSpecError(
                f"{ENV}: {part!r} is not NAME=kill@N or NAME=kill-in:SECONDS@N (N >= 1)"
            )
        delay = float(match["delay"]) if match["delay"] is not None else None
        points[match["name"]] = _Point(int(match["nth"]), delay)
    return points


_points = parse(os.environ.get(ENV, ""))
_lock = threading.Lock()


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def failpoint(name: str) -> None:
    """Crash here if SETTLE_FAILPOINTS says so; see the module docstring."""
    point = _points.get(name)
    if point is None:
        return
    with _lock:
        point.hits += 1
        fire = point.hits == point.nth
    if not fire:
        return
    if point.delay is None:
        _kill()
    else:
        threading.Timer(point.delay, _kill).start()
