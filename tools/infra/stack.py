"""Python API of the local stack: `up`, `down`, `status`, `env_lines`, used by the CLI and tests."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace

from services.adapters.kafka.access import KafkaAccess, kafka_access
from services.adapters.kafka.topics import ensure_topics
from services.platform.config import LOCAL_DATABASE_URL, LOCAL_KAFKA_BOOTSTRAP
from services.platform.settings import load_settings
from tools.infra import kafka, kafka_secure, postgres
from tools.infra.model import ComponentReport, ComponentStatus, Outcome, State
from tools.infra.paths import RunPaths, kafka_endpoint, pg_endpoint, run_paths

__all__ = [
    "ComponentReport",
    "ComponentStatus",
    "Outcome",
    "StackReport",
    "State",
    "database_url",
    "down",
    "ensure_topics",
    "env_lines",
    "kafka_bootstrap",
    "not_running",
    "status",
    "up",
]

DATABASE_ENV = "SETTLE_DATABASE_URL"
KAFKA_ENV = "SETTLE_KAFKA_BOOTSTRAP"
PREFIX_ENV = "SETTLE_TOPIC_PREFIX"
Progress = Callable[[str], None]
COMPONENTS = ("postgres", "kafka")


@dataclass(frozen=True)
class StackReport:
    """What one `up` call found or did, component by component."""

    postgres: ComponentReport
    kafka: ComponentReport
    topics_created: tuple[str, ...]
    seconds: float

    @property
    def components(self) -> tuple[ComponentReport, ...]:
        """Both components, PostgreSQL first."""
        return (self.postgres, self.kafka)

    @property
    def started(self) -> tuple[str, ...]:
        """Names of the components this call started."""
        return tuple(c.name for c in self.components if c.started)


def _external(variable: str) -> str | None:
    return os.environ.get(variable) or None


def database_url() -> str:
    """The database URL services should use: $SETTLE_DATABASE_URL or the local cluster's."""
    return _external(DATABASE_ENV) or LOCAL_DATABASE_URL


def kafka_bootstrap() -> str:
    """The bootstrap servers services should use: $SETTLE_KAFKA_BOOTSTRAP or the local broker."""
    return _external(KAFKA_ENV) or LOCAL_KAFKA_BOOTSTRAP


@contextlib.contextmanager
def _locked(paths: RunPaths) -> Iterator[None]:
    # Two `up`s at once (make and a test session) would both try to start the same servers.
    paths.run.mkdir(parents=True, exist_ok=True)
    with paths.lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _quiet(_: str) -> None:
    pass


def topics_access() -> KafkaAccess:
    """How `up` reaches the broker to create topics: through the settings for an external one
    (ConfigError if they are wrong), else the local broker's PLAINTEXT listener."""
    if _external(KAFKA_ENV):
        return kafka_access(load_settings())
    return KafkaAccess(LOCAL_KAFKA_BOOTSTRAP)


def up(*, progress: Progress | None = None, kafka_sasl_ssl: bool = False) -> StackReport:
    """Start what is neither running nor external, wait until it answers, ensure the topics;
    with `kafka_sasl_ssl`, the local broker listens for SASL_SSL clients too."""
    say = progress or _quiet
    began = time.monotonic()
    paths = replace(run_paths(), kafka_sasl_ssl=kafka_sasl_ssl)
    access = topics_access()
    with _locked(paths):
        pg = _bring_up("postgres", DATABASE_ENV, LOCAL_DATABASE_URL, postgres.start, paths, say)
        broker = _bring_up(
            "kafka",
            KAFKA_ENV,
            LOCAL_KAFKA_BOOTSTRAP,
            kafka.start,
            paths,
            say,
            " (the first run resolves the broker jars with Maven)",
        )
        prefix = os.environ.get(PREFIX_ENV, "")
        created = kafka.run_sync(lambda: ensure_topics(access, prefix))
    return StackReport(pg, broker, tuple(created), time.monotonic() - began)


def _bring_up(
    name: str,
    variable: str,
    local_url: str,
    start: Callable[[RunPaths], tuple[bool, int]],
    paths: RunPaths,
    say: Progress,
    hint: str = "",
) -> ComponentReport:
    """Start the local server `name` unless $`variable` names an external one to use."""
    external = _external(variable)
    if external:
        report = ComponentReport(name, Outcome.EXTERNAL, None, external)
    else:
        say(f"{name}: checking{hint}")
        started, pid = start(paths)
        outcome = Outcome.STARTED if started else Outcome.ALREADY_RUNNING
        report = ComponentReport(name, outcome, pid, local_url)
    say(f"{name}: {report.outcome}")
    return report


def down(
    *,
    purge: bool = False,
    progress: Progress | None = None,
    components: Collection[str] = COMPONENTS,
) -> None:
    """Stop the servers `up` started (data stays unless `purge`); safe when nothing runs.
    `components` narrows it to some of them ("postgres", "kafka")."""
    say = progress or _quiet
    paths = run_paths()
    with _locked(paths):
        if "kafka" in components:
            pids = kafka.stop(paths)
            say(f"kafka: stopped pid {', '.join(map(str, pids))}" if pids else "kafka: not running")
        if "postgres" in components:
            pid = postgres.stop(paths) if paths.pg_data.exists() else None
            say(f"postgres: stopped pid {pid}" if pid else "postgres: not running")
        if purge:
            for directory in (paths.kafka, paths.pg):
                shutil.rmtree(directory, ignore_errors=True)
            if paths.pg_link.is_symlink():
                paths.pg_link.unlink()
            say(f"purged {paths.kafka} and {paths.pg}")


def not_running() -> frozenset[str]:
    """Names of the local servers that do not run now; external ones are never named."""
    return frozenset(c.name for c in status() if c.state is State.DOWN)


def _address(name: str, value: str) -> str:
    if name == "kafka":
        return value
    endpoint = pg_endpoint(value)
    return f"{endpoint.host}:{endpoint.port}"


def status() -> list[ComponentStatus]:
    """PostgreSQL and Kafka: up, down or external, with pid and address."""
    paths = run_paths()
    result: list[ComponentStatus] = []
    for name, variable, local in (
        ("postgres", DATABASE_ENV, postgres.status),
        ("kafka", KAFKA_ENV, kafka.status),
    ):
        value = _external(variable)
        if value is None:
            result.append(local(paths))
        else:
            note = f"from ${variable}; not managed here"
            address = _address(name, value)
            result.append(ComponentStatus(name, State.EXTERNAL, None, address, value, note))
    return result


def env_lines(*, kafka_sasl_ssl: bool = False) -> str:
    """A shell `export` line with the database URL and bootstrap servers to use, shell-quoted;
    with `kafka_sasl_ssl`, the Kafka settings of the local broker's SASL_SSL listener."""
    pairs = {DATABASE_ENV: database_url(), KAFKA_ENV: kafka_bootstrap()}
    if kafka_sasl_ssl:
        paths = run_paths()
        endpoint = kafka_endpoint(paths.kafka_bootstrap)
        pairs |= kafka_secure.client_env(kafka_secure.client_access(endpoint, paths.kafka_secure))
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in pairs.items())
