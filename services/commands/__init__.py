"""The production commands: the services, and what operators run against a deployment. Each
names the module that holds it, so `settle` imports a command only when it runs (tools/cli.py
puts them beside the development commands)."""

from __future__ import annotations

from typing import NamedTuple


class Lazy(NamedTuple):
    """A command not yet imported: where it lives and the line `settle --help` shows."""

    target: str  # "module:attribute" of the click command
    summary: str  # its one-line help, as the command's own docstring begins


PRODUCTION: dict[str, Lazy] = {
    "ledger": Lazy(
        "services.commands.ledger:ledger",
        "Run the ledger: the tenant API, its admin port and the Kafka command intake.",
    ),
    "relay": Lazy(
        "services.commands.relay:relay",
        "Run a relay: outbox to Kafka, and rail dispatch under deterministic keys.",
    ),
    "inbox": Lazy(
        "services.commands.inbox:inbox",
        "Run the inbox: the rail's webhooks, the apply workers, readiness and metrics.",
    ),
    "reconciler": Lazy(
        "services.commands.reconciler:reconciler",
        "Run the reconciler: intraday and end-of-day runs and re-checks, on a schedule.",
    ),
    "console": Lazy("services.commands.console:console", "Run the operators' web console."),
    "migrate": Lazy(
        "services.commands.migrate:migrate",
        "Migrate PostgreSQL to the latest schema and create the Kafka topics settle uses.",
    ),
    "reconcile": Lazy(
        "services.commands.reconcile:reconcile",
        "Compare the ledger with the rail over a window, record the run and its breaks.",
    ),
    "review": Lazy(
        "services.commands.review:review",
        "Settlements under review (needs_review): list, show, resolve against the rail.",
    ),
    "breaks": Lazy(
        "services.commands.breaks:breaks",
        "Reconciliation breaks: list, show, resolve, correct the books, work on one.",
    ),
    "approvals": Lazy(
        "services.commands.approvals:approvals",
        "Proposals awaiting a second operator: list, approve, reject, withdraw.",
    ),
    "archive": Lazy(
        "services.commands.archive:archive",
        "Detach whole months of settlement history older than --before, for archiving.",
    ),
    "rail": Lazy("services.commands.rail:rail", "What the rail says, fetched from it."),
    "config": Lazy(
        "services.commands.config:config",
        "Check the settings a service would start with in production.",
    ),
}
