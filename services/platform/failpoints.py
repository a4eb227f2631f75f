"""Named crash and pause points, so tests can SIGKILL or freeze a service at an exact step.

A failpoint is a call `failpoint("dispatch.after_call")` placed between two steps whose
order matters for correctness. It does nothing unless `SETTLE_FAILPOINTS` names it:

    SETTLE_FAILPOINTS="dispatch.after_call=kill@5"       SIGKILL on the 5th time it is reached
    SETTLE_FAILPOINTS="dispatch.during_call=kill-in:0.2@3"  SIGKILL 0.2 s after the 3rd time,
                                                           whatever the process is doing then
    SETTLE_FAILPOINTS="rail.before_write=stop@2"         SIGSTOP on the 2nd time: the process
                                                           freezes there until a SIGCONT
    SETTLE_FAILPOINTS="dispatch.after_claim=stop@40+300"  on the 40th time, then on every
                                                           300th after it (340th, 640th, ...)
    SETTLE_FAILPOINTS="a=kill@1,b=kill@2"                 several points

The kill is a real SIGKILL of the process itself: no `finally`, no flush, no goodbye, which
is what a power cut or the OOM killer does. The stop is a real SIGSTOP: the whole process,
every thread and timer of it, stands still at that line, as in a stall of the machine, until
something sends it SIGCONT (a test, the chaos runner). Points are read from the environment
once, at import; with the variable unset every call is one dictionary lookup.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from dataclasses import dataclass

ENV = "SETTLE_FAILPOINTS"
_SPEC = re.compile(
    r"^(?P<name>[\w.]+)=(?P<action>kill|stop|kill-in:(?P<delay>[\d.]+))"
    r"@(?P<nth>\d+)(?:\+(?P<every>\d+))?$"
)


class FailpointSpecError(ValueError):
    """SETTLE_FAILPOINTS does not parse; the service refuses to start rather than ignore it."""


@dataclass(slots=True)
class _Point:
    nth: int  # fire on this hit (1-based)
    delay: float | None  # None: at once; else seconds after the hit
    signal: int = signal.SIGKILL  # what the process sends itself
    every: int | None = None  # then again on every `every`-th hit after `nth`
    hits: int = 0

    def fires(self) -> bool:
        """Whether the hit just counted is one this point fires on."""
        if self.hits == self.nth:
            return True
        past = self.hits - self.nth
        return self.every is not None and past > 0 and past % self.every == 0


def parse(spec: str) -> dict[str, _Point]:
    """The failpoints named by a SETTLE_FAILPOINTS value."""
    points: dict[str, _Point] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        match = _SPEC.match(part)
        every = int(match["every"]) if match is not None and match["every"] else None
        if match is None or int(match["nth"]) < 1 or every == 0:
            raise FailpointSpecError(
                f"{ENV}: {part!r} is not NAME=ACTION@N or NAME=ACTION@N+EVERY (N, EVERY >= 1),"
                " where ACTION is kill, stop or kill-in:SECONDS"
            )
        delay = float(match["delay"]) if match["delay"] is not None else None
        sent = signal.SIGSTOP if match["action"] == "stop" else signal.SIGKILL
        points[match["name"]] = _Point(int(match["nth"]), delay, sent, every)
    return points


_points = parse(os.environ.get(ENV, ""))
_lock = threading.Lock()


def _signal_self(sent: int) -> None:
    os.kill(os.getpid(), sent)


def failpoint(name: str) -> None:
    """Crash or freeze here if SETTLE_FAILPOINTS says so; see the module docstring."""
    point = _points.get(name)
    if point is None:
        return
    with _lock:
        point.hits += 1
        fire = point.fires()
    if not fire:
        return
    # Said before it happens, unbuffered: the process may never write another byte.
    action = "stop" if point.signal == signal.SIGSTOP else "kill"
    os.write(2, f"failpoint {name}: {action} on hit {point.hits}\n".encode())
    if point.delay is None:
        _signal_self(point.signal)
    else:
        threading.Timer(point.delay, _signal_self, (point.signal,)).start()
