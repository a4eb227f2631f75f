"""Process plumbing: pid files, liveness (psutil), ports, stopping, running as another user."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import psutil

from services.domain.errors import InfrastructureError
from tools.infra.paths import kafka_endpoint, pg_endpoint


def read_pid(pid_file: Path) -> int | None:
    """The positive pid on the first line of `pid_file`, or None when missing or garbled."""
    try:
        first = pid_file.read_text(encoding="ascii", errors="replace").split("\n", 1)[0]
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return None
    first = first.strip()
    if not first.isdigit() or int(first) <= 0:
        return None
    return int(first)


def pid_alive(pid: int) -> bool:
    """Whether `pid` names a running (not zombie) process."""
    # A child of ours that exited stays a zombie until reaped and would look alive.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def cmdline(pid: int) -> str | None:
    """The command line of `pid` joined by spaces, or None where it cannot be read."""
    try:
        return " ".join(psutil.Process(pid).cmdline()).strip()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def live_pid(pid_file: Path, marker: str | None = None) -> int | None:
    """The pid in `pid_file` if that process runs and its command line holds `marker`."""
    pid = read_pid(pid_file)
    if pid is None or not pid_alive(pid):
        return None
    if marker is not None:
        line = cmdline(pid)
        # A recycled pid after a reboot belongs to someone else; the command line tells.
        if line is not None and marker not in line:
            return None
    return pid


def pids_matching(marker: str) -> list[int]:
    """Pids of live processes (not this one) whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or ())
        if process.pid != os.getpid() and marker in line and pid_alive(process.pid):
            found.append(process.pid)
    return sorted(found)


# The local PostgreSQL's and broker's own ports (broker, controller): they sit inside the
# kernel's ephemeral range, so a private server or a test service given one by the kernel
# would keep the local stack from starting after it.
RESERVED_PORTS = frozenset(
    {pg_endpoint().port, kafka_endpoint().port, kafka_endpoint().controller_port}
)


# Services are given ports below the kernel's ephemeral range (Linux: 32768-60999), so that
# while a killed service restarts, no outgoing connection can be handed its port.
SERVICE_PORT_RANGE = range(20000, 32000)


def free_ports(count: int = 1, avoid: Collection[int] = ()) -> int:
    """The first of `count` consecutive free loopback ports (none in `avoid` nor reserved for
    the local stack), below the ephemeral range, picked at random so parallel runs differ."""
    taken = RESERVED_PORTS | set(avoid)
    for _ in range(1000):
        base = SERVICE_PORT_RANGE.start + secrets.randbelow(len(SERVICE_PORT_RANGE) - count)
        block = range(base, base + count)
        if not taken & set(block) and all(map(_free, block)):
            return base
    raise InfrastructureError(f"no {count} consecutive free ports in {SERVICE_PORT_RANGE}")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def terminate(pid: int, grace: float = 30.0) -> bool:
    """SIGTERM `pid`, wait up to `grace` seconds, then SIGKILL its process group; True if it ran."""
    if not pid_alive(pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        pgid = os.getpgid(pid)
        # Never take our own group (and the shell that runs us) down with it.
        if pgid != os.getpgid(0):
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def is_root() -> bool:
    """Whether we run with euid 0."""
    return os.geteuid() == 0


def tool(name: str, package: str, why: str) -> str:
    """The path of command `name`, installing Debian `package` first (root only) if it is
    missing; `why` says what needs it."""
    found = shutil.which(name)
    if found is None:
        apt_install([package], f"{why} and no {name} is on PATH")
        found = shutil.which(name)
    if found is None:
        raise InfrastructureError(f"{name} is still not on PATH after installing {package}")
    return found


def run_logged(args: list[str], log: Path, *, cwd: Path, timeout: float, **extra: Any) -> int:
    """Run `args` to its end with stdin closed and stdout and stderr written to `log` (a file,
    not a pipe: a child that forks a server could otherwise hold a pipe open); its exit
    status. `extra` goes to subprocess.run (a user, a new session)."""
    with log.open("w") as sink:
        done = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            timeout=timeout,
            check=False,
            **extra,
        )
    return done.returncode


def apt_install(packages: list[str], why: str) -> None:
    """Install Debian packages non-interactively (root only), or raise with how to do it."""
    hint = f"install them with: sudo apt-get install -y {' '.join(packages)}"
    if not is_root() or shutil.which("apt-get") is None:
        raise InfrastructureError(f"{why}; {hint}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode == 0:
        return
    # A fresh machine has no package lists yet.
    subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
    done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise InfrastructureError(f"{why}; apt-get failed:\n{done.stderr[-2000:]}\n{hint}")
