"""Env lines, external servers, endpoint parsing and PostgreSQL settings, without servers."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from services.platform.config import LOCAL_DATABASE_URL, LOCAL_KAFKA_BOOTSTRAP
from tools.infra import stack
from tools.infra.model import State
from tools.infra.paths import cluster_dir, kafka_endpoint, log_tail, pg_endpoint, run_paths
from tools.infra.postgres import render_conf, socket_dir_setting


def _exported(line: str) -> dict[str, str]:
    words = shlex.split(line)
    assert words[0] == "export"
    return dict(word.split("=", 1) for word in words[1:])


def test_env_line_names_the_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETTLE_DATABASE_URL", raising=False)
    monkeypatch.delenv("SETTLE_KAFKA_BOOTSTRAP", raising=False)
    assert _exported(stack.env_lines()) == {
        "SETTLE_DATABASE_URL": LOCAL_DATABASE_URL,
        "SETTLE_KAFKA_BOOTSTRAP": LOCAL_KAFKA_BOOTSTRAP,
    }


def test_env_line_quotes_external_values(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://app:p@ss w'rd;$(x)@db.internal:5432/settle"
    monkeypatch.setenv("SETTLE_DATABASE_URL", url)
    monkeypatch.setenv("SETTLE_KAFKA_BOOTSTRAP", "k1:9092,k2:9092")
    line = stack.env_lines()
    # A real shell must read the value back verbatim, running nothing inside it.
    shown = subprocess.run(
        ["/bin/sh", "-c", f'{line}; printf %s "$SETTLE_DATABASE_URL"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown == url
    assert _exported(line) == {
        "SETTLE_DATABASE_URL": url,
        "SETTLE_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
    }


def test_status_reports_external_servers_without_probing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SETTLE_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("SETTLE_DATABASE_URL", "postgresql://u@db.example:6543/x")
    monkeypatch.setenv("SETTLE_KAFKA_BOOTSTRAP", "k1:9092")
    by_name = {c.name: c for c in stack.status()}
    assert by_name["postgres"].state is State.EXTERNAL
    assert by_name["postgres"].address == "db.example:6543"
    assert by_name["kafka"].state is State.EXTERNAL
    assert by_name["kafka"].url == "k1:9092"


def test_run_dir_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SETTLE_RUN_DIR", str(tmp_path))
    paths = run_paths()
    assert paths.pg_link == tmp_path / "pg"  # the cluster itself, or a link to it
    assert paths.pg_data == cluster_dir(tmp_path) / "data"
    assert paths.kafka_pid == tmp_path / "kafka" / "broker.pid"
    assert paths.pom.is_file()
    assert paths.log4j.is_file()


def test_endpoints_come_from_the_shared_constants() -> None:
    pg = pg_endpoint(LOCAL_DATABASE_URL)
    assert (pg.host, pg.port, pg.user, pg.database) == ("127.0.0.1", 55432, "settle", "settle")
    kafka = kafka_endpoint(LOCAL_KAFKA_BOOTSTRAP)
    assert (kafka.host, kafka.port, kafka.controller_port) == ("127.0.0.1", 59092, 59093)


def test_postgres_conf_listens_locally_and_quotes(tmp_path: Path) -> None:
    conf = render_conf(pg_endpoint(LOCAL_DATABASE_URL), tmp_path / "it's")
    assert "listen_addresses = '127.0.0.1'" in conf
    assert "port = '55432'" in conf
    assert "max_connections = '200'" in conf
    assert "shared_buffers = '512MB'" in conf
    assert "fsync = 'on'" in conf
    assert "it''s" in conf


def test_socket_dir_is_dropped_when_too_long_for_sun_path() -> None:
    assert socket_dir_setting(Path("/tmp/s"), 55432) == "/tmp/s"
    assert socket_dir_setting(Path("/tmp/" + "x" * 120), 55432) == ""


def test_log_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))
    tail = log_tail(log, lines=3)
    assert tail.splitlines()[1:] == ["line 97", "line 98", "line 99"]
    assert "no log" in log_tail(tmp_path / "missing.log")
