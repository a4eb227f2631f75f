"""What `up` and `status` report about each component of the local stack."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    """Whether a component runs here, is stopped, or lives elsewhere."""

    UP = "up"
    DOWN = "down"
    EXTERNAL = "external"


class Outcome(StrEnum):
    """What one `up` call did about a component."""

    STARTED = "started"
    ALREADY_RUNNING = "already running"
    EXTERNAL = "external"


@dataclass(frozen=True)
class ComponentStatus:
    """One component as `status` sees it: pid and address are of our own server when local."""

    name: str
    state: State
    pid: int | None
    address: str
    url: str
    detail: str = ""


@dataclass(frozen=True)
class ComponentReport:
    """One component as `up` left it."""

    name: str
    outcome: Outcome
    pid: int | None
    url: str

    @property
    def started(self) -> bool:
        """Whether this `up` call started the server."""
        return self.outcome is Outcome.STARTED
