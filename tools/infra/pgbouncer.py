"""PgBouncer in transaction mode in front of a PostgreSQL server, for the tests and the
benchmark that run services through a pooler (docs/pooling.md).

The binary is Debian's `pgbouncer` (1.18 on this project's machines), installed with apt-get
when missing and root, as the servers, Java and promtool are (tools.infra.procs.tool);
otherwise starting it fails saying how to get it. Each bouncer runs in a directory of its own
on a free loopback port, with its own userlist: clients log in with SCRAM-SHA-256 as the
server URL's role and a password of the bouncer's; the bouncer logs in to the server as that
role with the same password. As root it runs as the server's user (PgBouncer refuses root).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from services.domain.errors import InfrastructureError
from tools.infra.paths import SERVER_USER_WHEN_ROOT, log_tail
from tools.infra.procs import free_ports, is_root, port_open, tool

WHY = "the services are tested through PgBouncer in transaction mode"
START_TIMEOUT_S = 15.0
ATTEMPTS = 3  # a port taken between choosing it and binding it is chosen again


@dataclass(frozen=True)
class Bouncer:
    """A running PgBouncer: where it listens and the login it takes."""

    host: str
    port: int
    user: str
    password: str
    directory: Path

    def url(self, database: str) -> str:
        """A `postgresql+asyncpg://` URL of `database` through this bouncer."""
        return (
            f"postgresql+asyncpg://{self.user}:{self.password}@{self.host}:{self.port}/{database}"
        )


def pgbouncer_binary() -> str:
    """The pgbouncer executable, installed first when missing (root only)."""
    return tool("pgbouncer", "pgbouncer", WHY)


def render_ini(server_url: str, bouncer: Bouncer, pool_size: int) -> str:
    """pgbouncer.ini: every database of the server, transaction pooling, SCRAM logins."""
    server = make_url(server_url)
    lines = [
        "[databases]",
        f"* = host={server.host or '127.0.0.1'} port={server.port or 5432}",
        "[pgbouncer]",
        f"listen_addr = {bouncer.host}",
        f"listen_port = {bouncer.port}",
        "unix_socket_dir =",
        "pool_mode = transaction",
        f"default_pool_size = {pool_size}",
        "max_client_conn = 500",
        "auth_type = scram-sha-256",
        f"auth_file = {bouncer.directory / 'userlist.txt'}",
        f"admin_users = {bouncer.user}",
        f"logfile = {bouncer.directory / 'pgbouncer.log'}",
        f"pidfile = {bouncer.directory / 'pgbouncer.pid'}",
    ]
    return "\n".join(lines) + "\n"


def _prepare(directory: Path, ini: str, user: str, password: str) -> Path:
    path = directory / "pgbouncer.ini"
    path.write_text(ini)
    userlist = directory / "userlist.txt"
    userlist.write_text(f'"{user}" "{password}"\n')
    userlist.chmod(0o600)
    if is_root():
        record = pwd.getpwnam(SERVER_USER_WHEN_ROOT)
        directory.chmod(0o755)
        for owned in (directory, path, userlist):
            os.chown(owned, record.pw_uid, record.pw_gid)
    return path


def _start(binary: str, ini: Path, bouncer: Bouncer) -> subprocess.Popen[bytes] | None:
    """The bouncer's process once it accepts connections; None if its port was taken."""
    args = [binary, *(["-u", SERVER_USER_WHEN_ROOT] if is_root() else []), str(ini)]
    process = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log = log_tail(bouncer.directory / "pgbouncer.log")
            if "Address already in use" in log:
                return None
            raise InfrastructureError(f"pgbouncer exited at start ({process.returncode}):\n{log}")
        if port_open(bouncer.host, bouncer.port):
            return process
        time.sleep(0.05)
    _stop(process)
    raise InfrastructureError(
        f"pgbouncer did not listen within {START_TIMEOUT_S:.0f} s:\n"
        f"{log_tail(bouncer.directory / 'pgbouncer.log')}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@contextmanager
def pgbouncer(server_url: str, *, pool_size: int = 2) -> Iterator[Bouncer]:
    """PgBouncer in transaction mode before the server of `server_url` (a SQLAlchemy URL),
    with `pool_size` server connections per database and role, stopped on the way out."""
    binary = pgbouncer_binary()
    user = make_url(server_url).username or "postgres"
    directory = Path(tempfile.mkdtemp(prefix="settle-pgbouncer-"))
    try:
        for _ in range(ATTEMPTS):
            bouncer = Bouncer("127.0.0.1", free_ports(), user, secrets.token_hex(16), directory)
            ini = _prepare(
                directory, render_ini(server_url, bouncer, pool_size), user, bouncer.password
            )
            process = _start(binary, ini, bouncer)
            if process is not None:
                break
        else:
            raise InfrastructureError(f"pgbouncer found no free port in {ATTEMPTS} attempts")
        try:
            yield bouncer
        finally:
            _stop(process)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
