"""W3C trace context of a settlement, carried from its request to the rail and back.

A settlement's trace starts where it is asked for: the `traceparent` (and `tracestate`) of
the HTTP request or of the Kafka command's headers, or, when absent or invalid, a new trace.
The ledger stores the context of its accept span with the settlement; every outbox event of
the settlement carries it as Kafka headers; the relay's rail call runs in a span child of
it; the inbox logs under it. Headers are read and written by OpenTelemetry's W3C propagator
only.

Spans are recorded only when an exporter is configured (`SETTLE_OTEL_EXPORTER`): then the
OpenTelemetry SDK is imported and installed as the tracer provider. With `none` (the
default) the API's no-op tracer hands back the parent's context, nothing is recorded or
sent, and a new trace's ids are drawn here, so every settlement still has a trace id.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from services.domain.trace_context import TraceContext

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
VERSION_00_LENGTH = 55  # 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>
_PROPAGATOR = TraceContextTextMapPropagator()
_TRACER = trace.get_tracer("settle")
_ids = random.Random()
_recording = False  # an SDK provider is installed: spans are recorded and exported


class TraceExporter(StrEnum):
    """Where recorded spans go (`SETTLE_OTEL_EXPORTER`)."""

    NONE = "none"  # nowhere: no SDK, no span recorded, ids still carried
    CONSOLE = "console"  # JSON spans on standard output, for a look on one machine
    OTLP = "otlp"  # OTLP over HTTP; OTEL_EXPORTER_OTLP_ENDPOINT etc. say where


def trace_id_of(context: TraceContext | str | None) -> str | None:
    """The 32 hex digits of the trace id, or None for no valid context."""
    if context is None:
        return None
    if isinstance(context, str):
        context = TraceContext(context)
    span_context = trace.get_current_span(_context_of(context)).get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else None


@contextmanager
def traced(
    name: str,
    parent: TraceContext | None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: dict[str, str] | None = None,
) -> Iterator[TraceContext]:
    """A span named `name` for the block, child of `parent` (the root of a new trace when
    that is absent or invalid); yields the span's own context, which the work it leads to
    carries on."""
    context = _parent_context(parent)
    if not _recording:
        # The no-op span is its parent's context: a valid version-00 parent carries on as it
        # came; anything else is written anew by the propagator, which bounds and cleans it
        # (a later version's extra fields, a tracestate), so no caller stores what it likes.
        span_context = trace.get_current_span(context).get_span_context()
        if parent is not None and span_context.is_remote and _plain(parent):
            yield parent
        else:
            yield _carrier_of(NonRecordingSpan(span_context))
        return
    span = _TRACER.start_span(name, context, kind, attributes)
    try:
        yield _carrier_of(span)
    except BaseException as e:
        span.record_exception(e)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(e).__name__))
        raise
    finally:
        span.end()


def headers_of(context: TraceContext) -> list[tuple[str, bytes]]:
    """Kafka headers that carry `context`."""
    headers = [(TRACEPARENT, context.traceparent.encode())]
    if context.tracestate:
        headers.append((TRACESTATE, context.tracestate.encode()))
    return headers


def use_exporter(exporter: TraceExporter, service: str) -> None:
    """Record and export spans of this process as `exporter` says; `none` installs nothing."""
    global _recording
    if exporter is TraceExporter.NONE:
        return
    # Imported only here: with no exporter the SDK is never loaded.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    if exporter is TraceExporter.OTLP:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        sink: SpanExporter = OTLPSpanExporter()
    else:
        sink = ConsoleSpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"settle-{service}"}))
    provider.add_span_processor(BatchSpanProcessor(sink))
    trace.set_tracer_provider(provider)
    _recording = True


def _parent_context(parent: TraceContext | None) -> Context:
    if parent is not None:
        context = _context_of(parent)
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    if _recording:
        return Context()  # the SDK draws the new trace's ids and records its root
    return trace.set_span_in_context(NonRecordingSpan(_new_span_context()))


def _plain(context: TraceContext) -> bool:
    return len(context.traceparent) == VERSION_00_LENGTH and not context.tracestate


def _context_of(context: TraceContext) -> Context:
    carrier = {TRACEPARENT: context.traceparent}
    if context.tracestate:
        carrier[TRACESTATE] = context.tracestate
    return _PROPAGATOR.extract(carrier)


def _carrier_of(span: trace.Span) -> TraceContext:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return TraceContext(carrier[TRACEPARENT], carrier.get(TRACESTATE))


def _new_span_context() -> SpanContext:
    # What the SDK's RandomIdGenerator draws, without loading the SDK; all-zero ids are invalid.
    trace_id = span_id = 0
    while not trace_id:
        trace_id = _ids.getrandbits(128)
    while not span_id:
        span_id = _ids.getrandbits(64)
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags.get_default())
