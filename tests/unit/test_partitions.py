"""Our partition rule agrees with Kafka's default partitioner, key for key."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from aiokafka.partitioner import murmur2 as library_murmur2
from hypothesis import given
from hypothesis import strategies as st

from services.contracts.partitions import murmur2, partition_for


@given(st.binary(max_size=80))
def test_murmur2_matches_the_kafka_client(data: bytes) -> None:
    assert murmur2(data) == library_murmur2(data)


@given(st.uuids(), st.integers(min_value=1, max_value=64))
def test_settlement_keys_land_where_the_default_partitioner_puts_them(
    settlement: object, count: int
) -> None:
    key = str(settlement).encode()
    partitions = list(range(count))
    assert partition_for(key, count) == DefaultPartitioner()(key, partitions, partitions)


def test_known_values_from_the_java_client() -> None:
    # Utils.murmur2 on these inputs, as Kafka's own tests list them (signed ints there).
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF
    assert murmur2(b"foobar") == -790332482 & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-long-string") == -985981536 & 0xFFFFFFFF
    assert murmur2(b"a-little-bit-longer-string") == -1486304829 & 0xFFFFFFFF
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971 & 0xFFFFFFFF
