"""Each service's settings: the sections it uses and no others.

In production each service refuses to start without the secrets its sections hold; a pod is
given only those. `Settings` is every section at once, for the commands that act across the
services (review, breaks, approvals, reconcile, rail) and for the development tools.
"""

from __future__ import annotations

from services.platform.authority import (
    CommandSigningSection,
    LimitsSection,
    OperatorClientSection,
    OperatorSection,
    TenantSection,
    WebhookSection,
)
from services.platform.config import Section
from services.platform.sections import (
    DatabaseSection,
    KafkaSection,
    RailKeySection,
    RailSection,
    SessionDatabaseSection,
    TelemetrySection,
)
from services.platform.tuning import (
    IdempotencySection,
    InboxSection,
    LeaseSection,
    ReconcileSection,
)

# A section's secrets are checked first, then the production rules of where things are;
# each class lists its sections in that order, so the first refusal is the one a reader
# of the environment would look for first.


class LedgerSettings(
    TenantSection,
    CommandSigningSection,
    RailSection,
    LimitsSection,
    IdempotencySection,
    DatabaseSection,
    KafkaSection,
    TelemetrySection,
):
    """The ledger: tenants' tokens and command signatures, what the rail pays, limits,
    idempotency windows, the database and Kafka."""


class RelaySettings(
    RailKeySection, LeaseSection, SessionDatabaseSection, KafkaSection, TelemetrySection
):
    """The relay: the rail and its key, the lease, the database (direct: its publisher
    LISTENs, its sessions carry timeouts and a name) and Kafka."""

    SESSION_USE = "sessions of its own (the outbox publisher's LISTEN, each session's timeouts)"


class InboxSettings(WebhookSection, RailSection, InboxSection, DatabaseSection, TelemetrySection):
    """The inbox: the webhook secret, which rail signs (Stripe's own API makes local defaults
    refused), its tuning and the database. It holds no operator's token: operators see and
    replay its events through the operator API (the reconciler's)."""


class ReconcilerSettings(
    RailKeySection,
    OperatorSection,
    ReconcileSection,
    SessionDatabaseSection,
    TelemetrySection,
):
    """The reconciler, which also serves the operator API: the rail and its key (to read it),
    the operators (their tokens, and the two-person policy), its schedule and the database
    (direct: its lock is a session advisory lock)."""

    SESSION_USE = "a session of its own (the reconciler's lock is a session advisory lock)"


class ConsoleSettings(
    RailKeySection, OperatorSection, TenantSection, DatabaseSection, TelemetrySection
):
    """The console: the rail and its key (to show what it holds), operators, tenants (who
    may sign in to their own view, when tokens are given) and the database."""

    def needs(self, variable: str) -> bool:
        # Tenants may sign in where tokens are given; without them only operators can.
        return variable != "SETTLE_API_TOKENS" and super().needs(variable)


class OperatorCommandSettings(OperatorClientSection, TelemetrySection):
    """An operator's commands (review, breaks, approvals, inbox replay): the operator API's
    address and the operator's own token, nothing else."""


class MigrateSettings(SessionDatabaseSection, KafkaSection, TelemetrySection):
    """`settle migrate`: the database's schema (as its owner, directly) and the topics."""

    SESSION_USE = "a session of its own (the migrations' lock and prepared statements)"


class Settings(
    RailKeySection,
    WebhookSection,
    TenantSection,
    OperatorSection,
    CommandSigningSection,
    LimitsSection,
    IdempotencySection,
    LeaseSection,
    InboxSection,
    ReconcileSection,
    DatabaseSection,
    KafkaSection,
    TelemetrySection,
):
    """Every section: the commands that act across the services, and the tools."""


# The settings each service command starts with.
SERVICES: dict[str, type[Section]] = {
    "ledger": LedgerSettings,
    "relay": RelaySettings,
    "inbox": InboxSettings,
    "reconciler": ReconcilerSettings,
    "console": ConsoleSettings,
    "migrate": MigrateSettings,
}
