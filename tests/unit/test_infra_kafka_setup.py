"""server.properties rendering, cluster ids and the jar-cache stamp, without a broker."""

from __future__ import annotations

from pathlib import Path

from services.platform.config import LOCAL_KAFKA_BOOTSTRAP
from tools.infra.kafka_setup import (
    STAMP_NAME,
    jars_cached,
    new_cluster_id,
    pom_hash,
    render_server_properties,
)
from tools.infra.paths import kafka_endpoint


def _parse(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_single_node_kraft_properties(tmp_path: Path) -> None:
    props = _parse(render_server_properties(kafka_endpoint("127.0.0.1:59092"), tmp_path / "d"))
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:59093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:59092,CONTROLLER://127.0.0.1:59093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:59092"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert props["log.dirs"] == str(tmp_path / "d")
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "num.partitions",
    ):
        assert props[key] == "1"


def test_properties_follow_the_shared_bootstrap_constant(tmp_path: Path) -> None:
    endpoint = kafka_endpoint(LOCAL_KAFKA_BOOTSTRAP)
    props = _parse(render_server_properties(endpoint, tmp_path))
    assert props["advertised.listeners"] == f"PLAINTEXT://{LOCAL_KAFKA_BOOTSTRAP}"
    assert f":{endpoint.port + 1}" in props["controller.quorum.voters"]


def test_cluster_ids_are_22_url_safe_chars_and_never_an_option() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cluster_id in ids:
        assert len(cluster_id) == 22
        assert not cluster_id.startswith("-")
        assert set(cluster_id) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_jar_cache_needs_a_stamp_matching_the_pom(tmp_path: Path) -> None:
    pom = tmp_path / "pom.xml"
    pom.write_text("<project>1</project>")
    lib = tmp_path / "lib"
    lib.mkdir()
    assert not jars_cached(lib, pom)
    (lib / STAMP_NAME).write_text(pom_hash(pom) + "\n")
    assert jars_cached(lib, pom)
    pom.write_text("<project>2</project>")
    assert not jars_cached(lib, pom)


def test_broker_thread_pools_fit_a_two_core_machine(tmp_path: Path) -> None:
    props = _parse(render_server_properties(kafka_endpoint("127.0.0.1:59092"), tmp_path))
    for key in ("num.network.threads", "num.io.threads", "background.threads"):
        assert 1 <= int(props[key]) <= 2, key
    assert props["offsets.topic.num.partitions"] == "6"
