"""The local Kafka broker: a detached JVM with a pid file, readiness by a metadata request."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from aiokafka.errors import KafkaError

from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.clients import admin_client
from services.domain.errors import InfrastructureError
from tools.infra import kafka_secure
from tools.infra.kafka_setup import (
    ensure_jars,
    format_storage,
    formatted,
    java,
    render_server_properties,
)
from tools.infra.model import ComponentStatus, State
from tools.infra.paths import RunPaths, kafka_endpoint, log_tail
from tools.infra.procs import live_pid, pids_matching, port_open, terminate

READY_TIMEOUT_S = 90
STOP_GRACE_S = 30
JVM_FLAGS = [
    # The broker keeps records in the page cache, not the heap: a few hundred MB suffice, and
    # a fixed small heap leaves the machine's memory to PostgreSQL and the file cache.
    "-Xms256m",
    "-Xmx768m",
    # G1 (the JVM's choice here too) with Kafka's own pause goal; its GC threads already
    # follow the 2 cores, and GC measured under 1% of the broker's CPU, so no other collector.
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    # The C1 compiler only: at a few hundred requests a second, C2's compilations cost more CPU
    # than its faster code saves, and every restart (chaos restarts Kafka) pays them again.
    "-XX:TieredStopAtLevel=1",
]
_T = TypeVar("_T")


def run_sync(make: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine to completion from sync code, in a thread if a loop already runs here."""

    async def main() -> _T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="settle-infra") as pool:
        return pool.submit(asyncio.run, main()).result()


async def broker_count(access: KafkaAccess, timeout_s: float = 5.0) -> int:
    """Number of brokers a metadata request through `access` returns; raises KafkaError if none."""
    admin = admin_client(access, "settle-infra", request_timeout_ms=int(timeout_s * 1000))
    try:
        await asyncio.wait_for(admin.start(), timeout_s)
        cluster = await asyncio.wait_for(admin.describe_cluster(), timeout_s)
        return len(cluster.get("brokers", []))
    finally:
        with contextlib.suppress(TimeoutError, KafkaError, OSError):
            await admin.close()


def _marker(paths: RunPaths) -> str:
    # Our broker is the JVM given this properties file; nothing else names it.
    return str(paths.kafka_props)


def broker_pid(paths: RunPaths) -> int | None:
    """Pid of our broker JVM, from the pid file or, if that was lost, from /proc."""
    pid = live_pid(paths.kafka_pid, marker=_marker(paths))
    if pid is not None:
        return pid
    strays = pids_matching(_marker(paths))
    return strays[0] if strays else None


def _launch(paths: RunPaths) -> int:
    lib = ensure_jars(paths)
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    paths.kafka_data.mkdir(parents=True, exist_ok=True)
    secure = paths.kafka_secure if paths.kafka_sasl_ssl else None
    paths.kafka_props.write_text(render_server_properties(endpoint, paths.kafka_data, secure))
    format_storage(paths, lib, _scram_login(paths))
    args = [java(), *JVM_FLAGS, "-cp", f"{lib}/*", f"-Dlog4j2.configurationFile={paths.log4j}"]
    args += ["kafka.Kafka", str(paths.kafka_props)]
    # sh backgrounds the JVM and exits, so the broker is nobody's child and outlives the CLI.
    script = '"$@" </dev/null >>"$0" 2>&1 & echo $!'
    with paths.kafka_log.open("a") as log:
        log.write(f"\n=== settle infra up {time.strftime('%Y-%m-%d %H:%M:%S')} ===\n")
    done = subprocess.run(
        ["/bin/sh", "-c", script, str(paths.kafka_log), *args],
        capture_output=True,
        text=True,
        cwd=paths.kafka,
        start_new_session=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise InfrastructureError(f"could not launch the broker: {done.stderr.strip()}")
    pid = int(done.stdout.strip())
    paths.kafka_pid.write_text(f"{pid}\n")
    return pid


def _scram_login(paths: RunPaths) -> list[str]:
    """Format arguments creating the SASL_SSL listener's SCRAM login, when it is asked for."""
    if not paths.kafka_sasl_ssl:
        return []
    kafka_secure.ensure_certificates(paths.kafka_secure)
    if formatted(paths):
        kafka_secure.formatted_password(paths.kafka_secure)  # raises unless formatted with it
        return []
    return kafka_secure.scram_format_args(kafka_secure.new_password(paths.kafka_secure))


def accesses(paths: RunPaths) -> list[KafkaAccess]:
    """How clients reach our broker: PLAINTEXT, and SASL_SSL when it listens for that too."""
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    found = [KafkaAccess(endpoint.bootstrap)]
    if paths.kafka_sasl_ssl:
        found.append(kafka_secure.client_access(endpoint, paths.kafka_secure))
    return found


def _answers(access: KafkaAccess) -> bool:
    return run_sync(lambda: broker_count(access)) > 0


def _require_secure_listener(paths: RunPaths) -> None:
    # server.properties is written at launch: it says which listeners the running JVM opened.
    if not paths.kafka_sasl_ssl:
        return
    props = paths.kafka_props.read_text() if paths.kafka_props.exists() else ""
    if f"{kafka_secure.LISTENER}://" not in props:
        raise InfrastructureError(
            "the local broker runs without its SASL_SSL listener; stop it (`settle infra down`) "
            "and start it again with `settle infra up --kafka-security sasl_ssl`"
        )


def _wait_ready(paths: RunPaths, pid: int, timeout: float) -> None:
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    deadline = time.monotonic() + timeout
    last = "port closed"
    while time.monotonic() < deadline:
        if live_pid(paths.kafka_pid, marker=_marker(paths)) != pid:
            raise InfrastructureError(f"the Kafka broker exited\n{log_tail(paths.kafka_log)}")
        if port_open(endpoint.host, endpoint.port):
            try:
                if all(_answers(access) for access in accesses(paths)):
                    return
                last = "metadata lists no broker yet"
            except (TimeoutError, KafkaError, OSError) as e:
                last = f"{type(e).__name__}: {e}"
        time.sleep(0.25)
    raise InfrastructureError(
        f"Kafka did not answer a metadata request on {endpoint.bootstrap} within "
        f"{timeout:.0f} s ({last})\n{log_tail(paths.kafka_log)}"
    )


def start(paths: RunPaths) -> tuple[bool, int]:
    """Run the broker unless ours already does; (whether this call started it, its pid)."""
    paths.kafka.mkdir(parents=True, exist_ok=True)
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    pid = broker_pid(paths)
    if pid is not None:
        paths.kafka_pid.write_text(f"{pid}\n")
        _require_secure_listener(paths)
        if port_open(endpoint.host, endpoint.port):
            return False, pid
        _wait_ready(paths, pid, READY_TIMEOUT_S)
        return False, pid
    paths.kafka_pid.unlink(missing_ok=True)
    ports = [endpoint.port, endpoint.controller_port]
    ports += [endpoint.secure_port] if paths.kafka_sasl_ssl else []
    if any(port_open(endpoint.host, port) for port in ports):
        raise InfrastructureError(
            f"a port of {ports} on {endpoint.host} is taken by a process that is not our "
            "broker; stop it or set SETTLE_KAFKA_BOOTSTRAP to use it"
        )
    pid = _launch(paths)
    try:
        _wait_ready(paths, pid, READY_TIMEOUT_S)
    except InfrastructureError:
        # A half-started broker would hold the ports and the data dir lock; take it down.
        terminate(pid, grace=10)
        paths.kafka_pid.unlink(missing_ok=True)
        raise
    return True, pid


def stop(paths: RunPaths) -> list[int]:
    """SIGTERM our broker(s), SIGKILL the process group after a grace period; pids stopped."""
    pids = sorted(
        {p for p in (live_pid(paths.kafka_pid, _marker(paths)),) if p}
        | set(pids_matching(_marker(paths)))
    )
    stopped = [pid for pid in pids if terminate(pid, grace=STOP_GRACE_S)]
    paths.kafka_pid.unlink(missing_ok=True)
    return stopped


def status(paths: RunPaths) -> ComponentStatus:
    """Whether our broker runs and its port answers."""
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    url = endpoint.bootstrap
    pid = broker_pid(paths)
    if pid is None:
        return ComponentStatus("kafka", State.DOWN, None, endpoint.bootstrap, url)
    answering = port_open(endpoint.host, endpoint.port)
    detail = "" if answering else "process runs but the port does not answer"
    state = State.UP if answering else State.DOWN
    return ComponentStatus("kafka", state, pid, endpoint.bootstrap, url, detail)
