"""The Kafka topics settle uses: their names, partition counts and topic-level settings."""

from __future__ import annotations

from dataclasses import dataclass, field

COMMANDS = "settlement.commands"
COMMANDS_DLQ = "settlement.commands.dlq"
EVENTS = "settlement.events"


@dataclass(frozen=True)
class TopicSpec:
    """A topic by its unprefixed name, partition count and topic-level configuration."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


# The broker stamps each command with its append time: a signature's age is judged against
# it, so a command waiting in a backlog stays valid and a captured one written again later
# does not (services/ledger/command_auth.py).
APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}

TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(COMMANDS, 6, APPEND_TIME),
    TopicSpec(COMMANDS_DLQ, 3),
    TopicSpec(EVENTS, 6),
)
