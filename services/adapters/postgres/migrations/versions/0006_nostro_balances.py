"""The rail's balance as each reconciliation run read it, and the indexes a break's lineage and
the nostro view read by.

A run records the rail's balance per currency (available + pending) as of a cut-off second:
every balance transaction created before `as_of` is in it, none after. The next run opens
from it, so an opening balance is always one recorded, never assumed. Like a run's sources,
the rows are evidence: written only while their run is running, never changed or deleted.

A break's lineage reads the inbox rows of a settlement and of a rail object by id, and the
nostro view reads the journal entries booked inside its window: each by an index, never a
scan of the table.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = [
    """
    CREATE TABLE reconciliation_balances (
        run_id    bigint NOT NULL REFERENCES reconciliation_runs (id),
        currency  char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
        -- The cut-off: the balance holds every balance transaction created before it.
        as_of     timestamptz NOT NULL,
        -- Signed minor units, available + pending: a platform's balance may be negative.
        balance   bigint NOT NULL,
        -- Every item of the run agreed with the rail (nothing pending, no status drift, none
        -- healed): the ledger had caught up, so the balance may open a later comparison.
        quiet     boolean NOT NULL,
        PRIMARY KEY (run_id, currency)
    )
    """,
    "CREATE INDEX reconciliation_balances_as_of ON reconciliation_balances (as_of, run_id)",
    # The same guard as the sources': a finished run's evidence is final.
    """CREATE TRIGGER reconciliation_balances_open BEFORE INSERT ON reconciliation_balances
       FOR EACH ROW EXECUTE FUNCTION settle_reconciliation_source_open()""",
    """CREATE TRIGGER reconciliation_balances_append_only
       BEFORE UPDATE OR DELETE ON reconciliation_balances
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    """CREATE INDEX inbox_events_settlement ON inbox_events (settlement_id)
       WHERE settlement_id IS NOT NULL""",
    """CREATE INDEX inbox_events_object ON inbox_events (object_id)
       WHERE object_id IS NOT NULL""",
    "CREATE INDEX journal_entries_occurred_at ON journal_entries (occurred_at)",
]

DOWNGRADE = [
    "DROP INDEX journal_entries_occurred_at",
    "DROP INDEX inbox_events_object",
    "DROP INDEX inbox_events_settlement",
    "DROP TABLE reconciliation_balances",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
