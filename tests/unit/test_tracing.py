"""The trace context a settlement carries: continued from a valid caller's `traceparent`,
started afresh otherwise, and its spans recorded only when an exporter is configured."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from services.domain.errors import ConfigError
from services.domain.trace_context import TraceContext, carried
from services.platform.settings import load_settings
from services.platform.tracing import TraceExporter, headers_of, trace_id_of, traced

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_valid_callers_trace_is_continued_with_its_state() -> None:
    with traced("settlement.accept", carried(CALLER, "vendor=a1")) as context:
        pass
    assert trace_id_of(context) == CALLER_TRACE
    assert context.tracestate == "vendor=a1"
    assert headers_of(context) == [
        ("traceparent", context.traceparent.encode()),
        ("tracestate", b"vendor=a1"),
    ]


@pytest.mark.parametrize(
    "traceparent",
    [
        None,
        "",
        "not a traceparent",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # all-zero span id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff is invalid
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # upper case
    ],
)
def test_an_absent_or_invalid_traceparent_starts_a_new_trace(traceparent: str | None) -> None:
    with traced("settlement.accept", carried(traceparent, "vendor=a1")) as first:
        pass
    with traced("settlement.accept", carried(traceparent)) as second:
        pass
    assert trace_id_of(first) not in (None, CALLER_TRACE, "0" * 32)
    assert trace_id_of(second) not in (None, trace_id_of(first))
    assert first.tracestate is None  # dropped with the invalid parent it belonged to


def test_a_later_versions_extra_fields_are_not_carried_on() -> None:
    later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + "x" * 400
    with traced("settlement.accept", carried(f"  {CALLER}")) as padded:
        pass
    with traced("settlement.accept", carried(later)) as context:
        pass
    assert padded.traceparent == CALLER
    assert trace_id_of(context) == CALLER_TRACE
    assert context.traceparent == CALLER  # rewritten as version 00, the extra dropped


def test_a_trace_id_is_read_only_from_a_valid_context() -> None:
    assert trace_id_of(CALLER) == CALLER_TRACE
    assert trace_id_of(TraceContext(CALLER)) == CALLER_TRACE
    assert trace_id_of("00-zz-yy-01") is None
    assert trace_id_of(None) is None
    assert carried(None, "vendor=a1") is None


def test_the_exporter_is_named_by_its_setting() -> None:
    assert load_settings({}).otel_exporter is TraceExporter.NONE
    assert load_settings({"SETTLE_OTEL_EXPORTER": "otlp"}).otel_exporter is TraceExporter.OTLP
    with pytest.raises(ConfigError) as caught:
        load_settings({"SETTLE_OTEL_EXPORTER": "jaeger"})
    assert caught.value.variable == "SETTLE_OTEL_EXPORTER"


RECORD_A_SPAN = f"""
from services.domain.trace_context import carried
from services.platform.tracing import TraceExporter, traced, use_exporter
import sys
use_exporter(TraceExporter(sys.argv[1]), "relay")
with traced("rail.send", carried({CALLER!r})) as context:
    pass
print("context", context.traceparent, flush=True)
"""


def run_with_exporter(exporter: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", RECORD_A_SPAN, exporter],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def test_with_the_console_exporter_a_span_child_of_the_callers_is_recorded() -> None:
    out = run_with_exporter("console")
    first, _, spans = out.partition("\n")
    traceparent = first.split()[1]
    span = json.loads(spans)
    assert span["name"] == "rail.send"
    assert span["context"]["trace_id"] == f"0x{CALLER_TRACE}"
    assert span["parent_id"] == "0x00f067aa0ba902b7"  # the caller's span is its parent
    assert traceparent == f"00-{CALLER_TRACE}-{span['context']['span_id'][2:]}-01"
    assert span["resource"]["attributes"]["service.name"] == "settle-relay"


def test_with_no_exporter_nothing_is_recorded_and_the_sdk_is_not_loaded() -> None:
    probe = (
        RECORD_A_SPAN
        + "\nprint('sdk', any(m.startswith('opentelemetry.sdk') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "none"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [f"context {CALLER}", "sdk False"]
