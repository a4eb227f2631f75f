"""The demo waits for the relays' consumer group: stable, with every relay in it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.run.ready import group_members

GROUP = "t.settle-relay"


@dataclass
class Described:
    groups: list[tuple[object, ...]]


@dataclass
class FakeAdmin:
    """Answers describe_consumer_groups as the broker does: raw DescribeGroups tuples."""

    state: str
    members: list[tuple[str, ...]] = field(default_factory=list)

    async def describe_consumer_groups(self, group_ids: list[str]) -> list[Described]:
        return [
            Described(
                [(0, g, self.state, "consumer", "roundrobin", self.members) for g in group_ids]
            )
        ]


async def test_only_a_stable_group_counts_its_members() -> None:
    two = [("m1", "c1", "h1", b"", b""), ("m2", "c2", "h2", b"", b"")]
    assert await group_members(FakeAdmin("Stable", two), GROUP) == 2  # type: ignore[arg-type]
    assert await group_members(FakeAdmin("PreparingRebalance", two), GROUP) == 0  # type: ignore[arg-type]
    assert await group_members(FakeAdmin("Empty"), GROUP) == 0  # type: ignore[arg-type]
