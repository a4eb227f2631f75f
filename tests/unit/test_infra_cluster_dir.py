"""Where the local PostgreSQL cluster goes: in the run directory when the server's user can
reach it, elsewhere (one stable directory per run directory) when it cannot."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.infra.paths import (
    CLUSTERS_HOME,
    SERVER_USER_WHEN_ROOT,
    cluster_dir,
    reachable_by,
)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder everyone may traverse (pytest's own open_dir sits under a mode-700 one)."""
    made = Path(tempfile.mkdtemp(dir="/tmp"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made)


def test_a_mode_700_folder_is_not_reachable_by_the_server_user(open_dir: Path) -> None:
    home = open_dir / "home"
    (home / "checkout").mkdir(parents=True)
    home.chmod(0o700)
    assert not reachable_by(home / "checkout" / ".run", SERVER_USER_WHEN_ROOT)
    home.chmod(0o711)
    assert reachable_by(home / "checkout" / ".run", SERVER_USER_WHEN_ROOT)


def test_directories_not_made_yet_do_not_count(open_dir: Path) -> None:
    open_dir.chmod(0o755)
    assert reachable_by(open_dir / "not" / "made" / "yet", SERVER_USER_WHEN_ROOT)


def test_as_root_the_cluster_leaves_a_run_directory_the_server_user_cannot_reach(
    open_dir: Path,
) -> None:
    run = open_dir / "closed" / ".run"
    run.mkdir(parents=True)
    (open_dir / "closed").chmod(0o700)
    placed = cluster_dir(run)
    # Only root hands the cluster to another user; anyone else owns both.
    assert placed.parent == (CLUSTERS_HOME if os.geteuid() == 0 else run)
    assert placed == cluster_dir(run)  # the same run directory always finds its cluster again
    assert placed != cluster_dir(open_dir / "closed" / "other")
    (open_dir / "closed").chmod(0o755)
    assert cluster_dir(run) == run / "pg"
