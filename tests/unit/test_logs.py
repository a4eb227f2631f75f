"""Service log lines: one JSON object a line (or text), and every line written while a
settlement is handled names its id, tenant and trace id."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from services.domain.errors import ConfigError
from services.platform.logs import (
    JsonLines,
    LogFormat,
    LogLevel,
    TextLines,
    about_settlement,
    settlement_fields,
    use_log_format,
)
from services.platform.settings import load_settings

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SID = "01a21a39-6133-7fc9-90be-588bb063979e"


class Sink(NamedTuple):
    logger: logging.Logger
    out: io.StringIO
    handler: logging.StreamHandler[io.StringIO]


@pytest.fixture
def written() -> Iterator[Sink]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("settle.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield Sink(logger, out, handler)
    finally:
        logger.removeHandler(handler)


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_about_a_settlement_names_it_its_tenant_and_trace(written: Sink) -> None:
    logger, out, handler = written
    handler.setFormatter(JsonLines("relay"))
    logger.info("before")
    with about_settlement(SID, "acme", TRACEPARENT):
        logger.info("rail answered %s", "accepted")
    logger.info("after")
    before, about, after = lines(out)
    assert about["message"] == "rail answered accepted"
    assert (about["settlement_id"], about["tenant"], about["trace_id"]) == (SID, "acme", TRACE_ID)
    assert about["service"] == "relay" and about["level"] == "INFO"
    assert about["logger"] == "settle.test.logs" and str(about["time"]).endswith("Z")
    for line in (before, after):
        assert not {"settlement_id", "tenant", "trace_id"} & set(line)


def test_a_traceback_is_one_field_of_the_one_line(written: Sink) -> None:
    logger, out, handler = written
    handler.setFormatter(JsonLines("inbox"))
    try:
        raise ValueError("bad row\nsecond line")
    except ValueError:
        logger.exception("applying failed")
    [line] = lines(out)
    assert "ValueError: bad row" in str(line["error"])


def test_text_lines_end_in_the_settlements_fields(written: Sink) -> None:
    logger, out, handler = written
    handler.setFormatter(TextLines())
    with about_settlement(SID, "acme", None):
        logger.warning("no trace stored")
    assert out.getvalue().rstrip().endswith(f"no trace stored settlement_id={SID} tenant=acme")


async def test_each_task_keeps_its_own_settlement() -> None:
    async def handle(sid: str) -> str | None:
        with about_settlement(sid, "acme", TRACEPARENT):
            await asyncio.sleep(0)
            fields = settlement_fields()
            return fields.settlement_id if fields else None

    assert await asyncio.gather(handle("a"), handle("b")) == ["a", "b"]
    assert settlement_fields() is None


def test_the_format_is_named_by_its_setting_and_json_by_default() -> None:
    assert load_settings({}).log_format is LogFormat.JSON
    assert load_settings({"SETTLE_LOG_FORMAT": "text"}).log_format is LogFormat.TEXT
    with pytest.raises(ConfigError) as caught:
        load_settings({"SETTLE_LOG_FORMAT": "xml"})
    assert caught.value.variable == "SETTLE_LOG_FORMAT"
    assert load_settings({}).log_level is LogLevel.INFO
    with pytest.raises(ConfigError, match="SETTLE_LOG_LEVEL"):
        load_settings({"SETTLE_LOG_LEVEL": "chatty"})


def test_use_log_format_puts_one_handler_on_the_root() -> None:
    root = logging.getLogger()
    kept, level = list(root.handlers), root.level
    try:
        use_log_format(LogFormat.JSON, "ledger")
        use_log_format(LogFormat.JSON, "ledger")
        [handler] = root.handlers
        assert isinstance(handler.formatter, JsonLines)
        # A settlement's routine steps are debug lines: not written at the default level.
        assert not logging.getLogger("services.relay.rail").isEnabledFor(logging.DEBUG)
        use_log_format(
            LogFormat.JSON, "ledger", load_settings({"SETTLE_LOG_LEVEL": "debug"}).log_level
        )
        assert logging.getLogger("services.relay.rail").isEnabledFor(logging.DEBUG)
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in kept:
            root.addHandler(h)
        root.setLevel(level)
