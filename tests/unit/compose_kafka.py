"""deploy/compose.yaml's Kafka read the way its containers read it: each broker's properties
as the apache/kafka image makes them from its KAFKA_* variables, and the logins and ACLs the
one-shot `kafka-access` creates, from the kafka-configs.sh and kafka-acls.sh in its command."""

from __future__ import annotations

import shlex
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose.yaml"
BROKERS = ("kafka-1", "kafka-2", "kafka-3")
ACCESS = "kafka-access"
# The variables the image passes to the JVM or its scripts rather than into server.properties
# (kafka.docker.KafkaDockerWrapper.ExcludeServerPropsEnv).
NOT_PROPERTIES = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
        "KAFKA_JMX_HOSTNAME",
    }
)
Grant = tuple[str, str, str]  # (resource type, resource name, operation)


def services() -> dict[str, Any]:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def broker_properties(environment: dict[str, Any]) -> dict[str, str]:
    """The properties the image writes from `environment`: KAFKA_ dropped, lower case, `_` is
    `.`, `__` is `_`, `___` is `-` (KafkaDockerWrapper.getServerConfigsFromEnv)."""
    properties = {}
    for name, value in environment.items():
        if name.startswith("KAFKA_") and name not in NOT_PROPERTIES:
            key = name.replace("KAFKA_", "").lower().replace("_", ".")
            properties[key.replace("...", "-").replace("..", "_")] = str(value)
    return properties


def listeners(properties: dict[str, str], key: str = "listeners") -> dict[str, str]:
    """Listener name -> address of a `listeners` or `advertised.listeners` value."""
    named = (entry.split("://", 1) for entry in properties[key].split(","))
    return {name: address for name, address in named}


def protocols(properties: dict[str, str]) -> dict[str, str]:
    """Listener name -> security protocol (listener.security.protocol.map)."""
    pairs = (
        entry.split(":", 1) for entry in properties["listener.security.protocol.map"].split(",")
    )
    return {name: protocol for name, protocol in pairs}


def access_commands() -> list[list[str]]:
    """The argument lists of each command `kafka-access` runs, in order."""
    (script,) = services()[ACCESS]["command"]
    commands: list[list[str]] = [[]]
    for token in shlex.split(script):
        if token == "&&":
            commands.append([])
        else:
            commands[-1].append(token)
    return commands


def _options(argv: list[str]) -> dict[str, list[str]]:
    """Each --option of `argv` with the values given to it (flags with none)."""
    options: dict[str, list[str]] = defaultdict(list)
    current = None
    for token in argv[1:]:
        if token.startswith("--"):
            current = token
            options.setdefault(current, [])
        elif current is not None:
            options[current].append(token)
    return dict(options)


def tool_options(tool: str) -> list[dict[str, list[str]]]:
    """The options of every `kafka-access` command that runs `tool` (kafka-acls.sh, ...)."""
    return [_options(argv) for argv in access_commands() if argv and argv[0].endswith(f"/{tool}")]


def acl_grants() -> dict[str, set[Grant]]:
    """Principal -> what kafka-access's kafka-acls.sh --add calls allow it."""
    grants: dict[str, set[Grant]] = defaultdict(set)
    for options in tool_options("kafka-acls.sh"):
        resources = [("topic", t) for t in options.get("--topic", [])]
        resources += [("group", g) for g in options.get("--group", [])]
        resources += [("transactional-id", t) for t in options.get("--transactional-id", [])]
        resources += [("cluster", "kafka-cluster")] if "--cluster" in options else []
        for principal in options["--allow-principal"]:
            for operation in options["--operation"]:
                grants[principal] |= {(kind, name, operation) for kind, name in resources}
    return dict(grants)


def scram_logins() -> dict[str, str]:
    """User -> the --add-config value kafka-access's kafka-configs.sh gives it."""
    logins = {}
    for options in tool_options("kafka-configs.sh"):
        assert options["--entity-type"] == ["users"]
        (user,) = options["--entity-name"]
        (logins[user],) = options["--add-config"]
    return logins
