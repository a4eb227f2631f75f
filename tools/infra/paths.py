"""Where the local infrastructure keeps its files, and the endpoints it serves on."""

from __future__ import annotations

import hashlib
import os
import pwd
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import services
from services.platform.config import LOCAL_DATABASE_URL, LOCAL_KAFKA_BOOTSTRAP

RUN_DIR_ENV = "SETTLE_RUN_DIR"
# initdb and postgres refuse root, so as root the cluster belongs to this user.
SERVER_USER_WHEN_ROOT = "postgres"
# Where a cluster goes when that user cannot reach the run directory (a checkout under
# /root or a `mktemp -d` folder, both mode 700): one directory per run directory.
CLUSTERS_HOME = Path("/var/lib/settle/clusters")


@dataclass(frozen=True)
class PgEndpoint:
    """Host, port, role and database of the local PostgreSQL cluster."""

    host: str
    port: int
    user: str
    database: str


@dataclass(frozen=True)
class KafkaEndpoint:
    """Host and ports of the local broker; the controller listens on the port after the
    broker's, and the SASL_SSL listener, when there is one, on the port after that."""

    host: str
    port: int

    @property
    def controller_port(self) -> int:
        """Port of the KRaft controller listener."""
        return self.port + 1

    @property
    def secure_port(self) -> int:
        """Port of the SASL_SSL client listener (`settle infra up --kafka-security sasl_ssl`)."""
        return self.port + 2

    @property
    def bootstrap(self) -> str:
        """host:port as clients want it."""
        return f"{self.host}:{self.port}"


def pg_endpoint(url: str = LOCAL_DATABASE_URL) -> PgEndpoint:
    """Parse a postgresql[+driver]:// URL into its parts, with libpq's defaults filled in."""
    parts = urlsplit(url)
    user = parts.username or "postgres"
    return PgEndpoint(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        user=user,
        database=parts.path.lstrip("/") or user,
    )


def kafka_endpoint(bootstrap: str = LOCAL_KAFKA_BOOTSTRAP) -> KafkaEndpoint:
    """Parse the first host:port of a bootstrap list."""
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    return KafkaEndpoint(host=host, port=int(port))


def repo_root() -> Path:
    """The checkout holding pyproject.toml (the package is installed editable)."""
    return Path(services.__file__).resolve().parents[1]


@dataclass(frozen=True)
class RunPaths:
    """Every file and directory the local stack reads or writes."""

    root: Path
    run: Path
    # Where the broker listens (the controller on the next port); another value runs a
    # second, private broker beside the usual one, as the broker-restart tests do.
    kafka_bootstrap: str = LOCAL_KAFKA_BOOTSTRAP
    jars: Path | None = None  # a jar cache to share instead of <run>/kafka-lib
    # Where the cluster listens and which role and database it serves; another value runs a
    # private cluster beside the usual one, as `settle chaos` does.
    database_url: str = LOCAL_DATABASE_URL
    # Whether the broker also listens for clients with SASL_SSL (see tools.infra.kafka_secure).
    kafka_sasl_ssl: bool = False

    @property
    def lock(self) -> Path:
        """Serialises concurrent `up`/`down` calls."""
        return self.run / ".infra.lock"

    @property
    def pg(self) -> Path:
        """Directory of the PostgreSQL cluster, owned by the server's user (see cluster_dir)."""
        return cluster_dir(self.run)

    @property
    def pg_link(self) -> Path:
        """<run>/pg: the cluster itself, or a symbolic link to it when it lives elsewhere."""
        return self.run / "pg"

    @property
    def pg_data(self) -> Path:
        """PGDATA."""
        return self.pg / "data"

    @property
    def pg_log(self) -> Path:
        """Server log written by pg_ctl -l."""
        return self.pg / "postgres.log"

    @property
    def pg_sock(self) -> Path:
        """Unix socket directory."""
        return self.pg / "sock"

    @property
    def kafka(self) -> Path:
        """Directory of the broker's config, data, log and pid file."""
        return self.run / "kafka"

    @property
    def kafka_data(self) -> Path:
        """log.dirs of the broker (also its KRaft metadata log)."""
        return self.kafka / "data"

    @property
    def kafka_log(self) -> Path:
        """Broker stdout and stderr."""
        return self.kafka / "broker.log"

    @property
    def kafka_pid(self) -> Path:
        """Pid of the broker JVM."""
        return self.kafka / "broker.pid"

    @property
    def kafka_props(self) -> Path:
        """server.properties written on every start."""
        return self.kafka / "server.properties"

    @property
    def kafka_secure(self) -> Path:
        """The SASL_SSL listener's CA, broker key and certificate, and SCRAM password."""
        return self.kafka / "sasl_ssl"

    @property
    def kafka_lib(self) -> Path:
        """Jar cache resolved by Maven; survives --purge."""
        return self.jars or self.run / "kafka-lib"

    @property
    def pom(self) -> Path:
        """Maven project that names the broker's jars."""
        return self.root / "deploy" / "kafka" / "pom.xml"

    @property
    def log4j(self) -> Path:
        """Broker logging configuration."""
        return self.root / "deploy" / "kafka" / "log4j2.properties"


def reachable_by(path: Path, user: str) -> bool:
    """Whether `user` may traverse every existing directory from / down to `path`."""
    try:
        record = pwd.getpwnam(user)
    except KeyError:
        return True  # no such user: whoever needs it says so with a better message
    if record.pw_uid == 0:
        return True
    groups = set(os.getgrouplist(user, record.pw_gid))
    for directory in (path, *path.parents):
        try:
            mode = directory.stat()
        except FileNotFoundError:
            continue  # made later by root, with the modes checked here for its parents
        if mode.st_uid == record.pw_uid:
            bit = stat.S_IXUSR
        elif mode.st_gid in groups:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not mode.st_mode & bit:
            return False
    return True


def cluster_dir(run: Path) -> Path:
    """Where the PostgreSQL cluster of `run` lives: <run>/pg, or, when we are root and the
    server's user cannot reach <run>, CLUSTERS_HOME/<name of run>-<hash of its path>."""
    if os.geteuid() != 0 or reachable_by(run, SERVER_USER_WHEN_ROOT):
        return run / "pg"
    digest = hashlib.sha256(str(run).encode()).hexdigest()[:16]
    return CLUSTERS_HOME / f"{run.name.lstrip('.')}-{digest}"


def run_paths() -> RunPaths:
    """Paths under $SETTLE_RUN_DIR, or <repo>/.run when it is unset."""
    root = repo_root()
    override = os.environ.get(RUN_DIR_ENV)
    run = Path(override).expanduser().resolve() if override else root / ".run"
    return RunPaths(root=root, run=run)


def log_tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of a log file, or a note that there is none."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            tail = deque(f, maxlen=lines)
    except FileNotFoundError:
        return f"(no log at {path})"
    except PermissionError:
        return f"(log at {path} is not readable)"
    return f"--- last {len(tail)} lines of {path} ---\n" + "".join(tail).rstrip("\n")
