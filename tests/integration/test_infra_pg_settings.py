"""A cluster that `settle infra up` starts runs with the settings of tools/infra/pg_settings.py,
and its database has the statement statistics view. A private cluster on a free port, so the
shared one is never restarted."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import asyncpg_dsn
from tools.infra import postgres
from tools.infra.paths import RunPaths, repo_root
from tools.infra.pg_settings import cluster_settings, has_statement_stats, server_build
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[RunPaths]:
    run = Path(tempfile.mkdtemp(prefix="settle-pg-settings-", dir="/tmp"))
    run.chmod(0o755)  # as root, the server's own user must reach the cluster under it
    port = free_ports(1, set())
    url = f"postgresql+asyncpg://settle@127.0.0.1:{port}/settle"
    paths = RunPaths(root=repo_root(), run=run, database_url=url)
    try:
        postgres.start(paths)
        yield paths
    finally:
        try:
            postgres.stop(paths)
        finally:
            shutil.rmtree(paths.pg, ignore_errors=True)
            shutil.rmtree(run, ignore_errors=True)


def _canonical(value: str) -> str:
    # SHOW answers in the server's own units and words: 15min, 4GB, 16MB, on.
    return value.strip().lower()


@pytest.mark.timeout(300)
async def test_started_cluster_runs_every_setting(cluster: RunPaths) -> None:
    expected = cluster_settings(server_build(postgres.bindir()))
    conn = await asyncpg.connect(asyncpg_dsn(cluster.database_url))
    try:
        shown = {name: await conn.fetchval(f'SHOW "{name}"') for name in expected}
    finally:
        await conn.close()
    assert {k: _canonical(v) for k, v in shown.items()} == {
        k: _canonical(v) for k, v in expected.items()
    }
    for name in ("fsync", "synchronous_commit", "full_page_writes"):
        assert shown[name] == "on"


@pytest.mark.timeout(300)
async def test_statement_statistics_answer_in_the_service_database(cluster: RunPaths) -> None:
    installed = has_statement_stats(server_build(postgres.bindir()))
    conn = await asyncpg.connect(asyncpg_dsn(cluster.database_url))
    try:
        loaded = "pg_stat_statements" in await conn.fetchval("SHOW shared_preload_libraries")
        created = await conn.fetchval(
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'"
        )
        assert (loaded, created) == (installed, int(installed))
        if installed:
            await conn.execute("SELECT 1 AS settle_probe")
            calls = await conn.fetchval(
                "SELECT sum(calls) FROM pg_stat_statements WHERE query LIKE '%settle_probe%'"
            )
            assert calls >= 1
    finally:
        await conn.close()
