"""What the local PostgreSQL cluster runs with: a write-heavy OLTP service on a small machine,
holding money, so durability is never traded for speed (fsync, synchronous_commit and
full_page_writes stay on). deploy/compose.yaml starts its server with the same values, and a
unit test keeps the two equal.

Two values depend on how the server was built, read from its pg_config: WAL compression (lz4
from PostgreSQL 15 when built with it, else pglz) and pg_stat_statements (preloaded only when
its library is installed, so a server without the contrib modules still starts).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import NamedTuple

STATEMENT_STATS = "pg_stat_statements"

SETTINGS: dict[str, str] = {
    # A settlement acknowledged is a settlement on disk, and a page torn by a crash is
    # restored from its image: none of these three is ever turned off.
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "200",  # six services' pools, plus tests, tools and benchmarks
    "shared_buffers": "512MB",  # the hot tables and their indexes stay in memory
    # A page's first change after a checkpoint writes its whole 8 KB image to the WAL: a
    # checkpoint every 15 minutes instead of 5 writes a third of those images.
    "checkpoint_timeout": "15min",
    # Far enough apart that the timeout, not a burst of WAL, starts a checkpoint.
    "max_wal_size": "4GB",
    # Segments kept for reuse after a quiet spell, instead of new files made under load.
    "min_wal_size": "1GB",
    "checkpoint_completion_target": "0.9",  # a checkpoint's writes spread over its interval
    "wal_buffers": "16MB",  # a burst of commits fits in memory before it must be written
    "track_io_timing": "on",  # statement statistics show time spent waiting for reads
}

# Only with the library loaded: top-level statements (what the services send) are enough.
STATEMENT_STATS_SETTINGS = {
    "shared_preload_libraries": STATEMENT_STATS,
    "pg_stat_statements.track": "top",
}


class ServerBuild(NamedTuple):
    """What the installed server supports, as its pg_config reports it."""

    major: int  # e.g. 15
    configure: str  # the options it was configured with (`pg_config --configure`)
    library_dir: Path  # where its loadable modules are (`pg_config --pkglibdir`)


def wal_compression(build: ServerBuild) -> str:
    """lz4 (cheaper on CPU than pglz for the same full-page images) where the server takes it;
    `on`, which is pglz, everywhere else."""
    if build.major >= 15 and "--with-lz4" in build.configure:
        return "lz4"
    return "on"


def has_statement_stats(build: ServerBuild) -> bool:
    """Whether pg_stat_statements can be preloaded (its library is installed)."""
    return (build.library_dir / f"{STATEMENT_STATS}.so").is_file()


def cluster_settings(build: ServerBuild) -> dict[str, str]:
    """Every setting the cluster starts with, for a server built as `build`."""
    settings = {**SETTINGS, "wal_compression": wal_compression(build)}
    if has_statement_stats(build):
        settings.update(STATEMENT_STATS_SETTINGS)
    return settings


def server_build(bindir: Path) -> ServerBuild:
    """Ask the pg_config beside the server's binaries how it was built."""

    def ask(option: str) -> str:
        done = subprocess.run(
            [str(bindir / "pg_config"), option], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    version = re.search(r"PostgreSQL (\d+)", ask("--version"))
    return ServerBuild(
        major=int(version.group(1)) if version else 0,
        configure=ask("--configure"),
        library_dir=Path(ask("--pkglibdir") or "/nonexistent"),
    )
