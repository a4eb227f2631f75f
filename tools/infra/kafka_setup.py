"""What the broker needs before it starts: jars from Maven Central, server.properties, a format."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

from services.domain.errors import InfrastructureError
from tools.infra import kafka_secure
from tools.infra.paths import KafkaEndpoint, RunPaths
from tools.infra.procs import run_logged, tool

STAMP_NAME = ".settle-pom.sha256"
MAVEN_TIMEOUT_S = 900
# Kafka's pools are sized for a dedicated many-core server (3 network, 8 request handler and
# 10 background threads); on a 2-core machine shared with the whole stack, more threads than
# cores only add wake-ups and context switches, and the measured load (a few hundred
# requests a second) keeps one thread of each kind far from busy.
BROKER_THREADS = {
    "num.network.threads": "2",  # one per core: socket reads and writes, both listeners
    "num.io.threads": "2",  # one per core: request handling, the log appends and reads
    "background.threads": "2",  # retention, checkpoints: a few short tasks a minute
}


def java() -> str:
    """Path of the java launcher ($JAVA_HOME first), installing a JRE with apt-get when root."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return tool("java", "default-jre-headless", "Kafka needs Java 17+")


def pom_hash(pom: Path) -> str:
    """sha256 of pom.xml, which the jar cache's stamp must match."""
    return hashlib.sha256(pom.read_bytes()).hexdigest()


def jars_cached(lib: Path, pom: Path) -> bool:
    """Whether `lib` holds a completed copy of the jars `pom` names."""
    stamp = lib / STAMP_NAME
    try:
        return stamp.read_text().strip() == pom_hash(pom)
    except FileNotFoundError:
        return False


def ensure_jars(paths: RunPaths) -> Path:
    """The jar directory, resolved with `mvn dependency:copy-dependencies` unless cached."""
    if jars_cached(paths.kafka_lib, paths.pom):
        return paths.kafka_lib
    mvn = tool("mvn", "maven", "resolving the Kafka broker jars needs Maven")
    # Resolve beside the cache and swap it in whole, so an interrupted run never looks complete;
    # the staging directory is this process's own, as two fetches may run at once (a chaos run
    # beside `settle infra up`).
    staging = paths.kafka_lib.with_name(f"{paths.kafka_lib.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log = paths.run / f"maven-{os.getpid()}.log"
    args = [mvn, "-q", "-B", "-f", str(paths.pom), "dependency:copy-dependencies"]
    args += [f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
    code = run_logged(args, log, cwd=paths.root, timeout=MAVEN_TIMEOUT_S)
    if code != 0 or not any(staging.glob("kafka_*.jar")):
        tail = log.read_text(errors="replace").splitlines()[-40:]
        raise InfrastructureError("mvn could not resolve the Kafka jars:\n" + "\n".join(tail))
    (staging / STAMP_NAME).write_text(pom_hash(paths.pom) + "\n")
    log.unlink(missing_ok=True)
    if jars_cached(paths.kafka_lib, paths.pom):  # another fetch finished first; keep its copy
        shutil.rmtree(staging, ignore_errors=True)
        return paths.kafka_lib
    shutil.rmtree(paths.kafka_lib, ignore_errors=True)
    staging.rename(paths.kafka_lib)
    return paths.kafka_lib


def render_server_properties(
    endpoint: KafkaEndpoint, data_dir: Path, secure_dir: Path | None = None
) -> str:
    """server.properties of a single combined broker+controller node in KRaft mode; with
    `secure_dir`, a SASL_SSL client listener too (its files there, see kafka_secure)."""
    host, port, ctl = endpoint.host, endpoint.port, endpoint.controller_port
    listeners = [f"PLAINTEXT://{host}:{port}"]
    protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
    if secure_dir is not None:
        listeners.append(f"{kafka_secure.LISTENER}://{host}:{endpoint.secure_port}")
        protocols.append(f"{kafka_secure.LISTENER}:{kafka_secure.LISTENER}")
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{ctl}",
        "listeners": ",".join([*listeners, f"CONTROLLER://{host}:{ctl}"]),
        "advertised.listeners": ",".join(listeners),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": ",".join(protocols),
        "log.dirs": str(data_dir).replace("\\", "\\\\"),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
        **BROKER_THREADS,
        # One broker serves a handful of consumer groups: 50 offset partitions (the default)
        # are 50 more logs to open, checkpoint and recover after every restart.
        "offsets.topic.num.partitions": "6",
    }
    if secure_dir is not None:
        settings |= kafka_secure.listener_properties(endpoint, secure_dir)
    lines = ["# Written by `settle infra up` on every start; edits are lost."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def new_cluster_id() -> str:
    """A random KRaft cluster id: 16 bytes, URL-safe base64 without padding."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        # Kafka's own generator skips ids that a command line would read as an option.
        if not candidate.startswith("-"):
            return candidate


def formatted(paths: RunPaths) -> bool:
    """Whether the broker's data dir has been formatted."""
    return (paths.kafka_data / "meta.properties").exists()


def format_storage(paths: RunPaths, lib: Path, extra: Sequence[str] = ()) -> bool:
    """Format the data dir once (no meta.properties yet), with `extra` arguments (a SCRAM
    login); whether this call formatted it."""
    if formatted(paths):
        return False
    args = [java(), "-cp", f"{lib}/*", f"-Dlog4j2.configurationFile={paths.log4j}"]
    args += ["kafka.tools.StorageTool", "format", "-t", new_cluster_id()]
    args += ["-c", str(paths.kafka_props), *extra]
    done = subprocess.run(
        args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False
    )
    if done.returncode != 0:
        out = (done.stdout + done.stderr).strip()[-4000:]
        raise InfrastructureError(f"kafka StorageTool format failed:\n{out}")
    return True
