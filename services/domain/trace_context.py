"""The trace a settlement carries from its first request to its last event: a W3C trace
context as its two headers (and two columns) hold it."""

from __future__ import annotations

from typing import NamedTuple


class TraceContext(NamedTuple):
    """A W3C trace context as its two headers carry it."""

    traceparent: str  # version-traceid-spanid-flags, e.g. 00-<32 hex>-<16 hex>-01
    tracestate: str | None = None  # vendors' entries, passed on unchanged


def carried(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """The context two header (or column) values carry, None without a `traceparent`; it is
    checked where it is used: an invalid one starts a new trace (`traced`) and names none
    (`trace_id_of`), as the W3C rules say."""
    return TraceContext(traceparent, tracestate) if traceparent else None
