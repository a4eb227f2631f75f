"""Poison records: a Kafka record no consumer can use, passed over rather than retried.

A record that does not decode, or decodes to something invalid, will be exactly as bad on
every redelivery: a consumer that stopped on it would stop again on every restart, and on
every replica that took the partition over. So each consumer passes it by: it is logged with
where it sits and why, counted, dead-lettered where the consumer has a dead-letter topic,
and its offset is committed with its batch's.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from aiokafka import ConsumerRecord

MAX_DETAIL_CHARS = 500


class Poison(NamedTuple):
    """A record passed over: where it sits and why it cannot be used."""

    topic: str
    partition: int
    offset: int
    reason: str  # a machine-readable code, e.g. undecodable, invalid_settlement_id
    detail: str  # what was wrong, for people


def poison(record: ConsumerRecord, reason: str, detail: str) -> Poison:
    """The poison `record` is, for `reason`."""
    return Poison(record.topic, record.partition, record.offset, reason, detail)


def log_poison(log: logging.Logger, passed: Poison) -> None:
    """One warning naming the record's topic, partition, offset and reason."""
    log.warning(
        "poison record passed over: %s[%d]@%d %s: %s",
        passed.topic,
        passed.partition,
        passed.offset,
        passed.reason,
        passed.detail[:MAX_DETAIL_CHARS],
    )
