"""Which Kafka commands the ledger may book: its tenant configured, and signed when required.

The tenant of a command is the `tenant` field of the record, which anyone who can write to
the topic can set. So a command is booked only for a tenant settle knows (SETTLE_API_TOKENS),
and, where signing is required, only with a signature of its exact bytes under one of that
tenant's own secrets (services/contracts/command_signature.py). In optional mode a signed
command is still verified: a signature that does not hold is refused, never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from services.contracts.command_signature import TOLERANCE_SECONDS, SignatureRefusal, verify
from services.platform.service_settings import LedgerSettings

UNKNOWN_TENANT = "unknown_tenant"
LOG_APPEND_TIME = 1  # a Kafka record's timestamp type when the broker stamped it


class Refusal(NamedTuple):
    """Why a command may not be booked: the dead-letter reason and a sentence for people."""

    code: str  # unknown_tenant, signature_missing, signature_invalid or signature_expired
    message: str


@dataclass(frozen=True)
class CommandAuthority:
    """The tenants commands may be booked for, their signing secrets, and whether every
    command must be signed."""

    tenants: frozenset[str]
    # Never in a repr: an authority that ends up in a log line must not carry the secrets.
    secrets: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    signing_required: bool = False
    tolerance: int = TOLERANCE_SECONDS

    def refusal(
        self, tenant: object, value: bytes, signature: bytes | None, at: int
    ) -> Refusal | None:
        """None when the command `value` may be booked for `tenant`, its signature judged at
        unix time `at` (see `written_at`); else why not. `signature` is the record's
        settle-signature header, if any."""
        if not isinstance(tenant, str) or tenant not in self.tenants:
            return Refusal(UNKNOWN_TENANT, "the command's tenant is not configured in settle")
        if signature is None and not self.signing_required:
            return None
        why = verify(signature, value, self.secrets.get(tenant, ()), at, self.tolerance)
        if why is None:
            return None
        return Refusal(str(why), _MESSAGES[why])

    def unsigned_tenants(self) -> list[str]:
        """The configured tenants without a signing secret, sorted: under required signing
        none of their commands can be booked."""
        return sorted(t for t in self.tenants if not self.secrets.get(t))


_MESSAGES = {
    SignatureRefusal.MISSING: "the command carries no settle-signature header; signing is required",
    SignatureRefusal.INVALID: "the settle-signature header does not sign this command under"
    " a signing secret of its tenant",
    SignatureRefusal.EXPIRED: "the command was signed more than the tolerance ago (or ahead)",
}


def written_at(timestamp_ms: int, timestamp_type: int | None, now: int) -> int:
    """The unix time a signature's age is judged at: when the broker appended the record,
    if the broker stamped it (a commands topic with LogAppendTime), else `now`.

    The append time lets a command wait out a backlog or an outage and still book, while a
    captured command written again gets a new append time and expires. A producer's own
    timestamp (CreateTime) proves nothing, so without append times the age counts up to
    now: fail closed."""
    return timestamp_ms // 1000 if timestamp_type == LOG_APPEND_TIME else now


def command_authority(settings: LedgerSettings) -> CommandAuthority:
    """The authority the settings describe: the tenants of SETTLE_API_TOKENS, their secrets
    of SETTLE_COMMAND_SIGNING_SECRETS, and the signing mode."""
    return CommandAuthority(
        tenants=frozenset(settings.api_tokens),
        secrets={
            tenant: tuple(s.get_secret_value() for s in secrets)
            for tenant, secrets in settings.command_signing_secrets.items()
        },
        signing_required=settings.command_signing_required,
    )
