"""Errors of the rail simulator.

    RailSimError        base of every error the simulator raises on purpose
    ├── ApiError        a request Stripe would refuse; carries Stripe's error fields
    ├── FaultsError     a fault setting that is unknown or out of range
    ├── JournalError    a data directory whose journal cannot be read back
    └── DeliveryError   a webhook attempt that got no answer (retried with backoff)

``ApiError`` never escapes the core: it becomes a Stripe-shaped error response there.
"""

from __future__ import annotations


class RailSimError(Exception):
    """Base of every error the simulator raises on purpose."""

    retriable: bool = False


class ApiError(RailSimError):
    """A request refused the way Stripe refuses it: status, type, code, message, param."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.type = type_
        self.code = code
        self.param = param
        self.retriable = status >= 500 or status in (409, 429)


class FaultsError(RailSimError):
    """A fault setting that the simulator does not know or cannot use."""


class JournalError(RailSimError):
    """A journal broken before its last line: not what a kill leaves, so nothing is guessed."""


class DeliveryError(RailSimError):
    """A webhook attempt that got no answer: refused, broken, or too slow; retried later."""

    retriable = True
