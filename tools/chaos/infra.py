"""A private PostgreSQL cluster and Kafka broker for one chaos run, on free ports.

The run restarts both, so it never uses the shared servers: its own data under
`<run dir>/chaos/seed-<seed>/`, its own ports, the shared Kafka jar cache.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.topics import ensure_topics
from tools.infra import kafka, postgres
from tools.infra.paths import RunPaths, run_paths
from tools.infra.procs import free_ports

PORT_RANGE = (20000, 40000)


@dataclass(frozen=True)
class PrivateInfra:
    """Where the run's servers keep their files and listen."""

    paths: RunPaths
    topic_prefix: str

    @property
    def database_url(self) -> str:
        """The private cluster's URL."""
        return self.paths.database_url

    @property
    def bootstrap(self) -> str:
        """The private broker's host:port."""
        return self.paths.kafka_bootstrap

    @property
    def kafka(self) -> KafkaAccess:
        """How clients reach the private broker: PLAINTEXT, like every broker a run starts."""
        return KafkaAccess(self.bootstrap)


def plan(seed: int) -> PrivateInfra:
    """Fresh directories and free ports for a run with `seed` (the previous run's data goes)."""
    usual = run_paths()
    run = usual.run / "chaos" / f"seed-{seed}"
    _remove_stale(run, usual)
    run.mkdir(parents=True, exist_ok=True)
    os.chmod(run, 0o755)  # the postgres user must traverse it when we are root
    pg_port = free_ports(1, set())
    kafka_port = free_ports(2, {pg_port})
    paths = RunPaths(
        root=usual.root,
        run=run,
        kafka_bootstrap=f"127.0.0.1:{kafka_port}",
        jars=usual.kafka_lib,
        database_url=f"postgresql+asyncpg://settle@127.0.0.1:{pg_port}/settle",
    )
    return PrivateInfra(paths, f"chaos{seed}.")


def _remove_stale(run: Path, usual: RunPaths) -> None:
    # A previous run killed before it could clean up may have left its servers behind.
    old = RunPaths(root=usual.root, run=run, jars=usual.kafka_lib)
    kafka.stop(old)
    if postgres.server_pid(old) is not None:
        postgres.stop(old)
    for directory in (old.pg, old.kafka):
        shutil.rmtree(directory, ignore_errors=True)


def start(infra: PrivateInfra) -> None:
    """Start both servers and create the topics (blocking; run it in a thread)."""
    postgres.start(infra.paths)
    kafka.start(infra.paths)
    kafka.run_sync(lambda: ensure_topics(infra.kafka, infra.topic_prefix))


def stop(infra: PrivateInfra) -> None:
    """Stop both servers; safe when either is already down (blocking)."""
    try:
        kafka.stop(infra.paths)
    finally:
        if postgres.server_pid(infra.paths) is not None:
            postgres.stop(infra.paths)


def purge(infra: PrivateInfra) -> None:
    """Drop the servers' data after a passing run; the logs stay."""
    shutil.rmtree(infra.paths.pg_data, ignore_errors=True)
    shutil.rmtree(infra.paths.kafka_data, ignore_errors=True)
