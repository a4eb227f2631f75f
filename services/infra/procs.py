"""Process plumbing: pid files, liveness, ports, stopping, and running as another user."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from services.shared.errors import InfrastructureError

_PROC = Path("/proc")


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


def _is_zombie(pid: int) -> bool:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    # The state letter follows the parenthesised command, which may itself hold spaces.
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def pid_alive(pid: int) -> bool:
    """Whether `pid` names a running (not zombie) process."""
    # A child of ours that exited stays a zombie until reaped and would look alive.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def cmdline(pid: int) -> str | None:
    """The command line of `pid` joined by spaces, or None where /proc cannot tell."""
    try:
        raw = (_PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def live_pid(pid_file: Path, marker: str | None = None) -> int | None:
    """The pid in `pid_file` if that process runs and its command line holds `marker`."""
    pid = read_pid(pid_file)
    if pid is None or not pid_alive(pid):
        return None
    if marker is not None:
        line = cmdline(pid)
        # A recycled pid after a reboot belongs to someone else; /proc lets us tell.
        if line is not None and marker not in line:
            return None
    return pid


def pids_matching(marker: str) -> list[int]:
    """Pids of live processes whose command line holds `marker` (Linux /proc only)."""
    found: list[int] = []
    if not _PROC.is_dir():
        return found
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            line = cmdline(int(entry.name))
            if line and marker in line and pid_alive(int(entry.name)):
                found.append(int(entry.name))
    return sorted(found)


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
