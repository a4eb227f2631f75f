"""Errors shared by every settle service.

    SettleError                 base of every error settle raises on purpose
    ├── ConfigError             bad configuration, names the variable; fatal at start-up
    ├── SchemaError             an Avro payload or schema settle cannot use; never retried
    └── InfrastructureError     a local server (PostgreSQL, Kafka) did not come up

Each class says with ``retriable`` whether doing the same thing again may succeed, so callers
decide retry versus dead-letter without matching on messages.
"""

from __future__ import annotations


class SettleError(Exception):
    """Base of every error settle raises on purpose."""

    retriable: bool = False


class ConfigError(SettleError):
    """A configuration variable is missing or invalid; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


class SchemaError(SettleError):
    """A payload or schema cannot be encoded, decoded or resolved."""


class InfrastructureError(SettleError):
    """A local server did not start or answer in time; carries the log tail in the message."""

    retriable = True
