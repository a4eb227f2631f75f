"""The local PostgreSQL cluster: found binaries, initdb once, pg_ctl start/stop, readiness."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.domain.errors import InfrastructureError
from tools.infra.model import ComponentStatus, State
from tools.infra.paths import (
    SERVER_USER_WHEN_ROOT,
    PgEndpoint,
    RunPaths,
    log_tail,
    pg_endpoint,
)
from tools.infra.pg_settings import (
    SETTINGS,
    STATEMENT_STATS,
    cluster_settings,
    server_build,
)
from tools.infra.procs import apt_install, is_root, live_pid, port_open, run_logged

START_TIMEOUT_S = 60
BIND_ATTEMPTS = 5
# sun_path holds 108 bytes; past that PostgreSQL refuses the socket and TCP must do.
_MAX_SOCKET_PATH = 100


def find_bindir() -> Path | None:
    """The newest PostgreSQL bin directory that has initdb, or None."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    if shutil.which("pg_config"):
        done = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        bindir = Path(done.stdout.strip())
        if done.returncode == 0 and (bindir / "initdb").exists():
            return bindir
    return None


def bindir() -> Path:
    """PostgreSQL's bin directory, installing the server with apt-get first when root."""
    found = find_bindir()
    if found is None:
        apt_install(["postgresql"], "PostgreSQL server binaries (initdb, pg_ctl) are missing")
        found = find_bindir()
    if found is None:
        raise InfrastructureError("PostgreSQL installed but no */bin/initdb found")
    return found


def _server_user() -> dict[str, Any]:
    # initdb and postgres refuse to run as root, so root hands them to the postgres user.
    if not is_root():
        return {}
    try:
        pwd.getpwnam(SERVER_USER_WHEN_ROOT)
    except KeyError:
        raise InfrastructureError(
            f"running as root needs a '{SERVER_USER_WHEN_ROOT}' user for the server; "
            "apt-get install postgresql creates it"
        ) from None
    return {"user": SERVER_USER_WHEN_ROOT, "group": SERVER_USER_WHEN_ROOT, "extra_groups": []}


def _run_server_tool(paths: RunPaths, args: list[str], timeout: float) -> tuple[int, str]:
    out = paths.pg / "pg_ctl.out"
    extra = {"start_new_session": True, **_server_user()}
    code = run_logged(args, out, cwd=paths.pg, timeout=timeout, **extra)
    return code, out.read_text(errors="replace").strip()


def socket_dir_setting(sock: Path, port: int) -> str:
    """unix_socket_directories for `sock`, or '' (TCP only) when the path would be too long."""
    if len(str(sock / f".s.PGSQL.{port}")) > _MAX_SOCKET_PATH:
        return ""
    return str(sock)


def render_conf(endpoint: PgEndpoint, sock: Path, settings: Mapping[str, str] = SETTINGS) -> str:
    """settle.conf, included from postgresql.conf and rewritten on every start."""
    values = {
        "listen_addresses": endpoint.host,
        "port": str(endpoint.port),
        "unix_socket_directories": socket_dir_setting(sock, endpoint.port),
        **settings,
    }
    lines = ["# Written by `settle infra up` on every start; edits are lost."]
    lines += [f"{key} = '{value.replace(chr(39), chr(39) * 2)}'" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _make_home(paths: RunPaths) -> None:
    # A cluster outside the run directory: its parents made traversable whatever the umask,
    # and <run>/pg made a link to it so that the run directory still shows where it is.
    if paths.pg == paths.pg_link:
        return
    for directory in reversed((paths.pg.parent, *paths.pg.parent.parents)):
        if not directory.exists():
            directory.mkdir()
            directory.chmod(0o755)
    if not paths.pg_link.is_symlink():
        paths.pg_link.unlink(missing_ok=True)
        paths.pg_link.symlink_to(paths.pg, target_is_directory=True)


def _prepare(paths: RunPaths, endpoint: PgEndpoint) -> None:
    _make_home(paths)
    paths.pg_sock.mkdir(parents=True, exist_ok=True)
    if is_root():
        record = pwd.getpwnam(SERVER_USER_WHEN_ROOT)
        for path in (paths.pg, paths.pg_sock, paths.pg_log):
            if path.exists():
                os.chown(path, record.pw_uid, record.pw_gid)
        probe = ["test", "-w", str(paths.pg)]
        if subprocess.run(probe, cwd="/", check=False, **_server_user()).returncode != 0:
            raise InfrastructureError(
                f"user {SERVER_USER_WHEN_ROOT} cannot write {paths.pg}: make its parent "
                "directories traversable (chmod o+x) or set SETTLE_RUN_DIR elsewhere"
            )
    bins = bindir()
    if not (paths.pg_data / "PG_VERSION").exists():
        initdb = [str(bins / "initdb"), "-D", str(paths.pg_data), "-U", endpoint.user]
        code, out = _run_server_tool(
            paths, [*initdb, "--auth=trust", "--encoding=UTF8", "--no-locale"], timeout=180
        )
        if code != 0:
            raise InfrastructureError(f"initdb failed for {paths.pg_data}:\n{out}")
        with (paths.pg_data / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude_if_exists = 'settle.conf'\n")
    settle_conf = paths.pg_data / "settle.conf"
    settings = cluster_settings(server_build(bins))
    settle_conf.write_text(render_conf(endpoint, paths.pg_sock, settings))
    if is_root():
        record = pwd.getpwnam(SERVER_USER_WHEN_ROOT)
        os.chown(settle_conf, record.pw_uid, record.pw_gid)


def server_pid(paths: RunPaths) -> int | None:
    """Pid of the postmaster serving our data directory, if it runs."""
    return live_pid(paths.pg_data / "postmaster.pid", marker=str(paths.pg_data))


def _psql(endpoint: PgEndpoint, sql: str, database: str = "postgres") -> tuple[int, str]:
    psql = shutil.which("psql") or str(bindir() / "psql")
    args = [psql, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql]
    args += ["-h", endpoint.host, "-p", str(endpoint.port), "-U", endpoint.user, "-d", database]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "5", "PGAPPNAME": "settle-infra"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def _wait_ready(paths: RunPaths, endpoint: PgEndpoint, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if server_pid(paths) is None:
            raise InfrastructureError(
                f"PostgreSQL exited during start-up\n{log_tail(paths.pg_log)}"
            )
        if port_open(endpoint.host, endpoint.port):
            code, last = _psql(endpoint, "select 1")
            if code == 0:
                return
        time.sleep(0.2)
    raise InfrastructureError(
        f"PostgreSQL did not answer on {endpoint.host}:{endpoint.port} within {timeout:.0f} s "
        f"({last})\n{log_tail(paths.pg_log)}"
    )


def _ensure_database(endpoint: PgEndpoint) -> None:
    name = endpoint.database.replace("'", "''")
    code, out = _psql(endpoint, f"select 1 from pg_database where datname = '{name}'")
    if code == 0 and out == "1":
        return
    quoted = '"' + endpoint.database.replace('"', '""') + '"'
    code, out = _psql(endpoint, f"create database {quoted}")
    if code != 0 and "already exists" not in out:
        raise InfrastructureError(f"could not create database {endpoint.database}: {out}")


def _ensure_statement_stats(endpoint: PgEndpoint) -> None:
    # The view exists only where the extension was created; without the library loaded it
    # would fail on every read, so a server started without it gets none.
    code, loaded = _psql(endpoint, "show shared_preload_libraries")
    if code != 0 or STATEMENT_STATS not in loaded:
        return
    sql = f"create extension if not exists {STATEMENT_STATS}"
    code, out = _psql(endpoint, sql, database=endpoint.database)
    if code != 0:
        raise InfrastructureError(f"could not create {STATEMENT_STATS}: {out}")


def start(paths: RunPaths) -> tuple[bool, int]:
    """Run the cluster (initdb first if needed); (whether this call started it, postmaster pid)."""
    endpoint = pg_endpoint(paths.database_url)
    pid = server_pid(paths)
    if pid is not None:
        _wait_ready(paths, endpoint, START_TIMEOUT_S)
        return False, pid
    if port_open(endpoint.host, endpoint.port):
        raise InfrastructureError(
            f"port {endpoint.port} on {endpoint.host} is taken by a server that is not ours "
            f"({paths.pg_data}); stop it or set SETTLE_DATABASE_URL to use it"
        )
    _prepare(paths, endpoint)
    _pg_ctl_start(paths)
    _wait_ready(paths, endpoint, START_TIMEOUT_S)
    _ensure_database(endpoint)
    _ensure_statement_stats(endpoint)
    pid = server_pid(paths)
    if pid is None:
        raise InfrastructureError(f"PostgreSQL stopped right after start\n{log_tail(paths.pg_log)}")
    return True, pid


def _pg_ctl_start(paths: RunPaths) -> None:
    """pg_ctl start. A port held for a moment more (a server that just stopped, or a client's
    ephemeral port: ours sits in the kernel's ephemeral range) is waited out a few times."""
    args = [str(bindir() / "pg_ctl"), "-D", str(paths.pg_data), "-l", str(paths.pg_log)]
    args += ["-w", "-t", str(START_TIMEOUT_S), "start"]
    for attempt in range(1, BIND_ATTEMPTS + 1):
        code, out = _run_server_tool(paths, args, START_TIMEOUT_S + 15)
        if code == 0:
            return
        held = "Address already in use" in log_tail(paths.pg_log, lines=8)
        if not held or attempt == BIND_ATTEMPTS:
            raise InfrastructureError(f"pg_ctl start failed: {out}\n{log_tail(paths.pg_log)}")
        time.sleep(1.0)


def stop(paths: RunPaths) -> int | None:
    """Fast-stop our cluster; the pid it had, or None when it was not running."""
    pid = server_pid(paths)
    if pid is None:
        return None
    pg_ctl = str(bindir() / "pg_ctl")
    for mode in ("fast", "immediate"):
        args = [pg_ctl, "-D", str(paths.pg_data), "-m", mode, "-w", "-t", "60", "stop"]
        code, out = _run_server_tool(paths, args, timeout=75)
        if code == 0 or server_pid(paths) is None:
            return pid
    raise InfrastructureError(f"pg_ctl stop failed: {out}\n{log_tail(paths.pg_log)}")


def crash(paths: RunPaths) -> int | None:
    """Stop our cluster the way a crash would (`-m immediate`, recovery on the next start)."""
    pid = server_pid(paths)
    if pid is None:
        return None
    args = [str(bindir() / "pg_ctl"), "-D", str(paths.pg_data), "-m", "immediate", "-w", "stop"]
    code, out = _run_server_tool(paths, args, timeout=75)
    if code != 0 and server_pid(paths) is not None:
        raise InfrastructureError(f"pg_ctl stop -m immediate failed: {out}")
    return pid


def status(paths: RunPaths) -> ComponentStatus:
    """Whether our cluster runs and answers."""
    endpoint = pg_endpoint(paths.database_url)
    address = f"{endpoint.host}:{endpoint.port}"
    pid = server_pid(paths)
    if pid is None:
        return ComponentStatus("postgres", State.DOWN, None, address, paths.database_url)
    answering = port_open(endpoint.host, endpoint.port)
    detail = "" if answering else "process runs but the port does not answer"
    state = State.UP if answering else State.DOWN
    return ComponentStatus("postgres", state, pid, address, paths.database_url, detail)
