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


class RelaySettings(RailKeySection, LeaseSection, DatabaseSection, KafkaSection, TelemetrySection):
    """The relay: the rail and its key, the lease, the database and Kafka."""


class InboxSettings(
    WebhookSection, OperatorSection, RailSection, InboxSection, DatabaseSection, TelemetrySection
):
    """The inbox: the webhook secret, operators (GET /v1/inbox and replays), which rail
    signs (Stripe's own API makes local defaults refused), its tuning and the database."""


class ReconcilerSettings(
    RailKeySection,
    OperatorSection,
    ReconcileSection,
    DatabaseSection,
    TelemetrySection,
):
    """The reconciler, which also serves the operator API: the rail and its key (to read it),
    the operators (their tokens, and the two-person policy), its schedule and the database."""


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


class MigrateSettings(DatabaseSection, KafkaSection, TelemetrySection):
    """`settle migrate`: the database's schema and the topics."""


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
