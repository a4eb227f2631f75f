"""The sections that tune one service: the ledger's idempotency windows, the relay's lease,
the inbox's webhook handling and the reconciler's schedule."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from services.domain.breaks import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_OVERLAP_SECONDS,
    DEFAULT_RECHECK_AGES,
    parse_ages,
)
from services.domain.rail import DEFAULT_READ_RATE
from services.platform.config import Section


class IdempotencySection(Section):
    """How long a key replays its answer and then refuses reuse; its record is deleted this
    long after first use (at least replay + tombstone), by the ledger every cleanup
    interval, at most a batch per statement."""

    idempotency_replay_seconds: int = Field(86400, alias="SETTLE_IDEMPOTENCY_REPLAY_SECONDS", gt=0)
    idempotency_tombstone_seconds: int = Field(
        86400, alias="SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS", ge=0
    )
    idempotency_retention_hours: float = Field(
        48.0, alias="SETTLE_IDEMPOTENCY_RETENTION_HOURS", gt=0
    )
    idempotency_cleanup_seconds: float = Field(
        60.0, alias="SETTLE_IDEMPOTENCY_CLEANUP_SECONDS", gt=0
    )
    idempotency_cleanup_batch: int = Field(
        1000, alias="SETTLE_IDEMPOTENCY_CLEANUP_BATCH", ge=1, le=50_000
    )

    @field_validator("idempotency_retention_hours")
    @classmethod
    def _retention_covers_windows(cls, value: float, info: ValidationInfo) -> float:
        windows = info.data.get("idempotency_replay_seconds", 0) + info.data.get(
            "idempotency_tombstone_seconds", 0
        )
        if value * 3600 < windows:
            raise ValueError(
                f"must be at least replay + tombstone ({windows / 3600:g} hours), "
                "or a retried request could run twice"
            )
        return value


class LeaseSection(Section):
    """How long a relay holds an instruction it claimed before another may take it over."""

    relay_lease_seconds: float = Field(30.0, alias="SETTLE_RELAY_LEASE_SECONDS", ge=1.0)


class InboxSection(Section):
    """The webhook body cap, the parked-event retry budget and backoff, and apply workers."""

    inbox_max_body_bytes: int = Field(65536, alias="SETTLE_INBOX_MAX_BODY_BYTES", ge=1024)
    inbox_park_attempts: int = Field(10, alias="SETTLE_INBOX_PARK_ATTEMPTS", ge=1)
    inbox_retry_seconds: float = Field(1.0, alias="SETTLE_INBOX_RETRY_SECONDS", gt=0)
    inbox_retry_max_seconds: float = Field(300.0, alias="SETTLE_INBOX_RETRY_MAX_SECONDS", gt=0)
    inbox_workers: int = Field(4, alias="SETTLE_INBOX_WORKERS", ge=1, le=64)


class ReconcileSection(Section):
    """Seconds between intraday runs; the ages at which open breaks and submitted
    settlements are compared again ("1h,1d,7d,30d"; a bare number is seconds); how long an
    item handed to the rail may lag before the lag is a break; how far back before the
    last run's end an intraday run reads again, for objects the rail listed late; and how
    many reads a second a run may make of the rail (its read limit)."""

    reconcile_interval_seconds: float = Field(300.0, alias="SETTLE_RECONCILE_INTERVAL", gt=0)
    reconcile_recheck_ages: Annotated[tuple[int, ...], NoDecode] = Field(
        DEFAULT_RECHECK_AGES, alias="SETTLE_RECONCILE_RECHECK_AGES"
    )
    reconcile_grace_seconds: int = Field(
        DEFAULT_GRACE_SECONDS, alias="SETTLE_RECONCILE_GRACE_SECONDS", ge=0
    )
    reconcile_overlap_seconds: float = Field(
        DEFAULT_OVERLAP_SECONDS, alias="SETTLE_RECONCILE_OVERLAP_SECONDS", ge=0
    )
    reconcile_read_rate: float = Field(DEFAULT_READ_RATE, alias="SETTLE_RECONCILE_READ_RATE", gt=0)

    @field_validator("reconcile_recheck_ages", mode="before")
    @classmethod
    def _ages(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        parts = [p.strip() for p in value.split(",")]
        return parse_ages(",".join(f"{p}s" if p.isdigit() else p for p in parts))
