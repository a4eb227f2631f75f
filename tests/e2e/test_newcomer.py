"""A newcomer as root, with the checkout in a folder only root may enter (as `/root` and every
`mktemp -d` are): `settle infra up` works there, and `settle run` leaves things as it found
them — on Ctrl-C it stops the PostgreSQL and Kafka it started, and leaves running the ones
that were up before it began.

Each case runs in a network namespace of its own, so the checkout's servers listen on the
usual ports without meeting the suite's, and nothing of it can reach the network: the broker's
jars come from the suite's cache, as a second `make run` on one machine would find them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import unique
from tests.waiting import eventually_blocking
from tools.infra.kafka_setup import ensure_jars
from tools.infra.paths import cluster_dir, repo_root, run_paths

pytestmark = [pytest.mark.e2e, pytest.mark.alone]
CHECKOUT_PARTS = (
    "services",
    "railsim",
    "banksim",
    "tools",
    "deploy",
    "schemas",
    "pyproject.toml",
)
# The newcomer's defaults: nothing points settle at the suite's servers.
SUITE_VARIABLES = (
    "SETTLE_DATABASE_URL",
    "SETTLE_KAFKA_BOOTSTRAP",
    "SETTLE_RUN_DIR",
    "SETTLE_TOPIC_PREFIX",
    "SETTLE_RUN_PORTS_FROM",
)


class Newcomer:
    """A checkout in a mode-700 folder, run as root inside a network namespace of its own."""

    def __init__(self, home: Path, namespace: str) -> None:
        self.checkout = home / "settle"
        self.namespace = namespace
        self.env = {k: v for k, v in os.environ.items() if k not in SUITE_VARIABLES}
        self.env["PYTHONPATH"] = str(self.checkout)  # this checkout's code, not the suite's

    def argv(self, *args: str) -> list[str]:
        """`settle ARGS` as run in the namespace, from the checkout."""
        settle = ["-c", "from tools.cli import main; main()", *args]
        return ["ip", "netns", "exec", self.namespace, sys.executable, *settle]

    def settle(self, *args: str, timeout: float = 180) -> str:
        """Run `settle ARGS` to its end; its output, or the test fails with it."""
        done = subprocess.run(
            self.argv(*args),
            cwd=self.checkout,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"settle {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def states(self) -> dict[str, str]:
        """`settle infra status`: component name to up or down."""
        return {c["name"]: c["state"] for c in json.loads(self.settle("infra", "status", "--json"))}


@pytest.fixture
def newcomer() -> Iterator[Newcomer]:
    if os.geteuid() != 0:
        pytest.fail("this test plays a newcomer who is root; run the suite as root, as CI does")
    home = Path(tempfile.mkdtemp(prefix="settle-newcomer-"))  # mode 700, as mktemp -d makes
    assert home.stat().st_mode & 0o777 == 0o700
    namespace = unique("settle-nc-")[:24]
    subprocess.run(["ip", "netns", "add", namespace], check=True)
    user = Newcomer(home, namespace)
    source = repo_root()
    user.checkout.mkdir()
    for part in CHECKOUT_PARTS:
        copy = shutil.copytree if (source / part).is_dir() else shutil.copy2
        copy(source / part, user.checkout / part)
    jars = ensure_jars(run_paths())  # fetched outside the namespace if the suite had none
    shutil.copytree(jars, user.checkout / ".run" / "kafka-lib", copy_function=os.link)
    subprocess.run(["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"], check=True)
    try:
        yield user
    finally:
        subprocess.run(
            user.argv("infra", "down", "--purge"),
            env=user.env,
            cwd=user.checkout,
            capture_output=True,
            timeout=120,
            check=False,
        )
        subprocess.run(["ip", "netns", "delete", namespace], check=False)
        shutil.rmtree(home, ignore_errors=True)


def run_until_interrupted(user: Newcomer, log: Path) -> str:
    """`settle run --no-demo` until it serves, then Ctrl-C; what it printed."""
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            user.argv("run", "--no-demo"),
            cwd=user.checkout,
            env=user.env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        def serving_or_gone() -> bool:
            return "serving;" in log.read_text() or proc.poll() is not None

        eventually_blocking(serving_or_gone, 240, "settle run serving")
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text()


def test_infra_up_from_a_folder_the_server_user_cannot_enter(newcomer: Newcomer) -> None:
    run = newcomer.checkout / ".run"
    out = newcomer.settle("infra", "up")
    assert "postgres  started" in out and "kafka     started" in out, out
    assert newcomer.states() == {"postgres": "up", "kafka": "up"}
    cluster = cluster_dir(run)
    assert not cluster.is_relative_to(newcomer.checkout)  # postgres could not reach it there
    assert (cluster / "data" / "PG_VERSION").exists()
    assert (run / "pg").resolve() == cluster  # the run directory still shows where it is
    newcomer.settle("infra", "down", "--purge")
    assert newcomer.states() == {"postgres": "down", "kafka": "down"}
    assert not cluster.exists()


def test_run_stops_on_interrupt_the_servers_it_started(newcomer: Newcomer, tmp_path: Path) -> None:
    assert newcomer.states() == {"postgres": "down", "kafka": "down"}
    out = run_until_interrupted(newcomer, tmp_path / "run.out")
    assert "all services stopped" in out, out
    assert newcomer.states() == {"postgres": "down", "kafka": "down"}, out


def test_run_leaves_running_the_servers_that_were_up_before(
    newcomer: Newcomer, tmp_path: Path
) -> None:
    newcomer.settle("infra", "up")
    before = newcomer.settle("infra", "status", "--json")
    out = run_until_interrupted(newcomer, tmp_path / "run.out")
    assert "all services stopped" in out, out
    assert newcomer.settle("infra", "status", "--json") == before  # same servers, same pids
