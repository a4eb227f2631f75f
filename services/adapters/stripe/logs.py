"""stripe's request log lines, formatted only when someone will read them.

stripe's requestor formats three or four log lines per call (``logfmt`` of the URL, the
posted form and the whole answer body, each value quoted through a regular expression)
before its logger decides to drop them: about a tenth of the relay's CPU per rail call.
``log_only_when_heard`` puts a check in front of the two functions the requestor calls,
asking first what stripe itself asks (its logger's level, ``stripe.log``, ``STRIPE_LOG``);
whatever would have been logged still is, word for word.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from stripe import _api_requestor, _util

_Log = Callable[..., None]


def _heard_at(level: int, console: frozenset[str], log: _Log) -> _Log:
    def log_if_heard(message: str, **params: Any) -> None:
        console_level = _util._console_log_level()  # type: ignore[no-untyped-call]
        if _util.logger.isEnabledFor(level) or console_level in console:
            log(message, **params)

    log_if_heard.heard = True  # type: ignore[attr-defined]
    return log_if_heard


def log_only_when_heard() -> None:
    """Have stripe's requestor format its log lines only when they would be emitted."""
    if getattr(getattr(_api_requestor, "log_info", None), "heard", False):
        return  # already in place
    _api_requestor.log_info = _heard_at(  # type: ignore[attr-defined]
        logging.INFO, frozenset({"info", "debug"}), _util.log_info
    )
    _api_requestor.log_debug = _heard_at(  # type: ignore[attr-defined]
        logging.DEBUG, frozenset({"debug"}), _util.log_debug
    )
