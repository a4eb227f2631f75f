"""Pid files, liveness and ports, against processes and sockets this test makes itself."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.infra import procs
from tools.infra.procs import (
    SERVICE_PORT_RANGE,
    free_ports,
    live_pid,
    pid_alive,
    port_open,
    read_pid,
    terminate,
)


def test_read_pid_takes_the_first_line_only(tmp_path: Path) -> None:
    pid_file = tmp_path / "x.pid"
    pid_file.write_text("1234\n/some/data/dir\n")
    assert read_pid(pid_file) == 1234


def test_read_pid_rejects_missing_garbled_and_non_positive(tmp_path: Path) -> None:
    pid_file = tmp_path / "x.pid"
    assert read_pid(pid_file) is None
    for content in ("", "abc\n", "-5\n", "0\n", "12 34\n"):
        pid_file.write_text(content)
        assert read_pid(pid_file) is None, content
    assert read_pid(tmp_path) is None


def test_live_pid_for_a_running_process_and_its_marker(tmp_path: Path) -> None:
    marker = f"settle-test-marker-{os.getpid()}"
    program = "import time; print('up', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", program, marker], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"up\n"  # running
        pid_file = tmp_path / "child.pid"
        pid_file.write_text(f"{child.pid}\n")
        assert live_pid(pid_file) == child.pid
        assert live_pid(pid_file, marker=marker) == child.pid
        # A pid that now belongs to some other program is not ours.
        assert live_pid(pid_file, marker="kafka.Kafka /nowhere/server.properties") is None
    finally:
        child.kill()
        child.wait()


def test_an_exited_unreaped_child_is_not_alive(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    time.sleep(0.5)  # exited, but a zombie until someone reaps it
    pid_file = tmp_path / "child.pid"
    pid_file.write_text(f"{child.pid}\n")
    assert not pid_alive(child.pid)
    assert live_pid(pid_file) is None


def test_terminate_stops_a_process_that_honours_sigterm() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True
    )
    assert terminate(child.pid, grace=5)
    assert not pid_alive(child.pid)
    assert not terminate(child.pid, grace=1)


def test_terminate_kills_the_group_of_a_process_that_ignores_sigterm() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(30)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE
    )
    assert child.stdout is not None
    child.stdout.readline()  # the handler is installed
    began = time.monotonic()
    assert terminate(child.pid, grace=0.5)
    assert not pid_alive(child.pid)
    assert time.monotonic() - began < 5
    child.stdout.close()


def test_port_open_sees_a_listener_and_its_absence() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert port_open("127.0.0.1", port)
    assert not port_open("127.0.0.1", port, timeout=0.2)


def test_free_ports_are_consecutive_free_and_below_the_ephemeral_range() -> None:
    # A restarting service's port must never be one the kernel hands to an outgoing
    # connection (Linux's ephemeral range starts at 32768).
    low, _ = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        base = free_ports(3)
        assert SERVICE_PORT_RANGE.start <= base and base + 3 <= SERVICE_PORT_RANGE.stop <= low
        for port in range(base, base + 3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))


def test_free_ports_skip_what_is_taken_or_avoided(monkeypatch: pytest.MonkeyPatch) -> None:
    # The random picks are fixed: a block holding a port in use, then one holding an
    # avoided port, then a free one; only the last may be given.
    start = SERVICE_PORT_RANGE.start
    taken = free_ports(1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", taken))
        busy.listen()
        avoided = free_ports(2, avoid={taken})
        picks = iter([taken - start, avoided - start, avoided + 10 - start])
        monkeypatch.setattr(procs.secrets, "randbelow", lambda _: next(picks))
        assert free_ports(2, avoid={avoided + 1}) == avoided + 10
