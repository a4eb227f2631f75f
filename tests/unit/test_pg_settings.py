"""The PostgreSQL settings: durable whatever the build, lz4 and statement statistics only where
the server has them, and the Compose server started with the same values as the local one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from services.platform.config import LOCAL_DATABASE_URL
from tools.infra.paths import pg_endpoint, repo_root
from tools.infra.pg_settings import ServerBuild, cluster_settings
from tools.infra.postgres import render_conf

LZ4_BUILD = "'--with-lz4' '--with-zstd' '--with-openssl'"


@pytest.fixture
def with_library(tmp_path: Path) -> Path:
    (tmp_path / "pg_stat_statements.so").write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize(
    ("major", "configure", "expected"),
    [(15, LZ4_BUILD, "lz4"), (15, "'--with-openssl'", "on"), (14, LZ4_BUILD, "on")],
)
def test_wal_compression_is_lz4_only_where_the_server_takes_it(
    tmp_path: Path, major: int, configure: str, expected: str
) -> None:
    # PostgreSQL 14 knows wal_compression only as on/off; `lz4` would stop it from starting.
    settings = cluster_settings(ServerBuild(major, configure, tmp_path))
    assert settings["wal_compression"] == expected


def test_statement_statistics_are_preloaded_only_when_installed(
    tmp_path: Path, with_library: Path
) -> None:
    bare = cluster_settings(ServerBuild(15, LZ4_BUILD, tmp_path / "none"))
    assert "shared_preload_libraries" not in bare
    assert not any(name.startswith("pg_stat_statements.") for name in bare)
    full = cluster_settings(ServerBuild(15, LZ4_BUILD, with_library))
    assert full["shared_preload_libraries"] == "pg_stat_statements"
    assert full["pg_stat_statements.track"] == "top"


@pytest.mark.parametrize("major", [0, 14, 15])
def test_durability_is_never_traded_for_speed(tmp_path: Path, major: int) -> None:
    settings = cluster_settings(ServerBuild(major, "", tmp_path))
    for name in ("fsync", "synchronous_commit", "full_page_writes"):
        assert settings[name] == "on", name


def test_checkpoints_are_spaced_so_full_page_images_stay_rare(tmp_path: Path) -> None:
    settings = cluster_settings(ServerBuild(15, LZ4_BUILD, tmp_path))
    assert settings["checkpoint_timeout"] == "15min"
    assert settings["max_wal_size"] == "4GB"
    assert settings["track_io_timing"] == "on"


def test_settle_conf_carries_every_setting(with_library: Path) -> None:
    settings = cluster_settings(ServerBuild(15, LZ4_BUILD, with_library))
    conf = render_conf(pg_endpoint(LOCAL_DATABASE_URL), Path("/tmp/s"), settings)
    for name, value in settings.items():
        assert f"{name} = '{value}'" in conf


def _compose_settings() -> dict[str, str]:
    compose = yaml.safe_load((repo_root() / "deploy" / "compose.yaml").read_text())
    command = compose["services"]["postgres"]["command"]
    assert command[0] == "postgres"
    flags, values = command[1::2], command[2::2]
    assert set(flags) == {"-c"}
    return dict(value.split("=", 1) for value in values)


def test_compose_server_runs_the_local_clusters_settings(with_library: Path) -> None:
    # The official postgres:15 image is built with lz4 and ships pg_stat_statements.
    assert _compose_settings() == cluster_settings(ServerBuild(15, LZ4_BUILD, with_library))
