"""Where the tests' PostgreSQL and Kafka come from, in order of preference:

1. the environment (`SETTLE_DATABASE_URL`, `SETTLE_KAFKA_BOOTSTRAP`): servers someone runs;
2. testcontainers, when a Docker engine answers;
3. the project's own launcher (`settle infra up`), stopped again at the end of the run if a
   process of this run started it.

A run may spread over worker processes (pytest-xdist). Each asks the launcher, which starts
the servers once under its lock; the one that started them leaves a mark (the file
$SETTLE_TEST_INFRA_MARK names), and the run's last step (`stop_what_the_run_started`, in the
controlling process once every worker is done) stops them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Servers:
    """A PostgreSQL server (URL of a database on it) and a Kafka bootstrap, plus who gave them."""

    database_url: str
    kafka_bootstrap: str
    source: str


def _docker_answers() -> bool:
    try:
        import docker  # type: ignore[import-untyped]

        client = docker.from_env(timeout=3)
        return bool(client.ping())
    except Exception:  # noqa: BLE001 - any failure means "no engine here", which is the answer
        return False


@contextmanager
def _from_testcontainers() -> Iterator[Servers]:
    from testcontainers.kafka import KafkaContainer
    from testcontainers.postgres import PostgresContainer

    with PostgresContainer("postgres:15", driver="asyncpg") as pg, KafkaContainer() as kafka:
        yield Servers(pg.get_connection_url(), kafka.get_bootstrap_server(), "testcontainers")


INFRA_MARK = "SETTLE_TEST_INFRA_MARK"


def mark_path() -> Path | None:
    """Where a process of this run marks that it started the servers; None outside a run."""
    named = os.environ.get(INFRA_MARK)
    return Path(named) if named else None


@contextmanager
def _from_launcher() -> Iterator[Servers]:
    from services.platform.settings import load_settings
    from tools.infra import stack

    # The launcher itself leaves alone a server the environment names.
    report = stack.up()
    mark = mark_path()
    if report.started and mark is not None:
        mark.write_text(" ".join(report.started))
    settings = load_settings()
    try:
        yield Servers(settings.database_url, settings.kafka_bootstrap, "launcher")
    finally:
        if report.started and mark is None:
            stack.down()


def stop_what_the_run_started() -> None:
    """Stop the servers if a process of this run started them (the mark says so)."""
    mark = mark_path()
    if mark is None or not mark.exists():
        return
    from tools.infra import stack

    mark.unlink()
    stack.down()


@contextmanager
def servers() -> Iterator[Servers]:
    """Yield the servers for a test session, cleaning up whatever this session started."""
    url, bootstrap = os.environ.get("SETTLE_DATABASE_URL"), os.environ.get("SETTLE_KAFKA_BOOTSTRAP")
    if url and bootstrap:
        yield Servers(url, bootstrap, "environment")
        return
    with (_from_testcontainers if _docker_answers() else _from_launcher)() as found:
        yield found
