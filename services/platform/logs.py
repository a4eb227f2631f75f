"""Log lines of every service: JSON lines by default, one object a line, or plain text.

A line written while a settlement is handled (`about_settlement`) carries that settlement's
id, tenant and trace id, whichever logger writes it, so one settlement's lines can be found
across the ledger, the relay and the inbox by its id or by its trace. A JSON line:

    {"time": "2026-11-26T23:59:58.123Z", "level": "INFO", "service": "relay",
     "logger": "services.relay.dispatch", "message": "rail call answered accepted",
     "settlement_id": "0193...", "tenant": "acme", "trace_id": "4bf92f35..."}

`error` holds the traceback of a line logged with one. Text lines end in the same fields as
`key=value` pairs, for a person at a terminal (`SETTLE_LOG_FORMAT=text`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple

import orjson

from services.domain.trace_context import TraceContext
from services.platform.tracing import trace_id_of

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class LogFormat(StrEnum):
    """How a service writes its log lines (`SETTLE_LOG_FORMAT`)."""

    JSON = "json"  # one JSON object a line, for a log pipeline
    TEXT = "text"  # the classic line, for a person at a terminal


class LogLevel(StrEnum):
    """The least a service logs (`SETTLE_LOG_LEVEL`): each settlement's routine steps (a
    webhook applied, a rail call answered) are `debug`; what needs a look is `info` or more."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"


class SettlementFields(NamedTuple):
    """What every line about a settlement names."""

    settlement_id: str
    tenant: str | None
    trace_id: str | None


class _About(NamedTuple):
    settlement_id: object
    tenant: str | None
    trace: TraceContext | str | None  # read into a trace id only when a line is written


_SETTLEMENT: ContextVar[_About | None] = ContextVar("settle_settlement", default=None)


@contextmanager
def about_settlement(
    settlement_id: object, tenant: str | None, trace: TraceContext | str | None
) -> Iterator[None]:
    """Lines logged in the block (in this task) name the settlement, its tenant and trace."""
    token = _SETTLEMENT.set(_About(settlement_id, tenant, trace))
    try:
        yield
    finally:
        _SETTLEMENT.reset(token)


def settlement_fields() -> SettlementFields | None:
    """The settlement the current block is about, if any, as its lines name it."""
    about = _SETTLEMENT.get()
    if about is None:
        return None
    return SettlementFields(str(about.settlement_id), about.tenant, trace_id_of(about.trace))


class JsonLines(logging.Formatter):
    """Formats a record as one JSON object (see the module docstring)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        at = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, object] = {
            "time": at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        about = settlement_fields()
        if about is not None:
            line.update(about._asdict())
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class TextLines(logging.Formatter):
    """The classic text line, ending in the settlement's fields when it is about one."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        """The record as text, plus `settlement_id=... tenant=... trace_id=...`."""
        text = super().format(record)
        about = settlement_fields()
        if about is None:
            return text
        return text + "".join(f" {k}={v}" for k, v in about._asdict().items() if v is not None)


def use_log_format(log_format: LogFormat, service: str, level: LogLevel = LogLevel.INFO) -> None:
    """Send this process's log lines to standard error in `log_format`."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines(service) if log_format is LogFormat.JSON else TextLines())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
