"""A break is one discrepancy at one time: a closed break no longer stands for every later
discrepancy of its key.

Until now `break_key` was unique: once a break was healed or resolved, any later discrepancy
of the same settlement, object, type, field and currency only moved that closed row's
`last_seen`, so it was never reported open again. Now at most one break per key is open
(a unique index on `break_key` where `status = 'open'`); a discrepancy seen again after its
break closed is a new open break whose `previous_id` names the one before it, unless it is
the very discrepancy an operator resolved (same values), which stays resolved.

Two new break types: `duplicate_in_ledger`, one rail object named as the rail reference of
two settlements (the ledger books one payment twice), and `overdue`, a payout still in
transit past its arrival date and the days in which it may still fail; the staged rail
objects gain `arrival` (a payout's arrival date) for it. The type CHECK is replaced in place,
as 0019 did; the staging table is UNLOGGED and holds only running runs' rows.

The unique constraint is dropped and two indexes are built in its place: the partial unique
one, and one on (break_key, id) for the latest break of a key. Each is a plain CREATE INDEX
(the breaks table is small: one row per discrepancy found, not per settlement). The
downgrade fails while two rows share a key, or a break of a new type exists.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = (
    "missing_at_rail",
    "unknown_at_rail",
    "duplicate_at_rail",
    "amount_mismatch",
    "currency_mismatch",
    "destination_mismatch",
    "status_drift",
    "balance_mismatch",
    "statement_gap",
)
AFTER = (*BEFORE, "duplicate_in_ledger", "overdue")


def _check(types: Sequence[str]) -> str:
    listed = ", ".join(f"'{t}'" for t in types)
    return f"""
    ALTER TABLE reconciliation_breaks
     DROP CONSTRAINT reconciliation_breaks_break_type_check,
      ADD CONSTRAINT reconciliation_breaks_break_type_check CHECK (break_type IN ({listed}))
    """


def upgrade() -> None:
    op.execute(_check(AFTER))
    op.execute("ALTER TABLE reconciliation_rail_staging ADD COLUMN arrival bigint")
    op.execute(
        """ALTER TABLE reconciliation_breaks
             ADD COLUMN previous_id bigint REFERENCES reconciliation_breaks (id),
             DROP CONSTRAINT reconciliation_breaks_break_key_key"""
    )
    op.execute(
        """CREATE UNIQUE INDEX reconciliation_breaks_open_key ON reconciliation_breaks (break_key)
           WHERE status = 'open'"""
    )
    op.execute("CREATE INDEX reconciliation_breaks_key ON reconciliation_breaks (break_key, id)")


def downgrade() -> None:
    op.execute("ALTER TABLE reconciliation_rail_staging DROP COLUMN arrival")
    op.execute(_check(BEFORE))
    op.execute("DROP INDEX reconciliation_breaks_key")
    op.execute("DROP INDEX reconciliation_breaks_open_key")
    op.execute(
        """ALTER TABLE reconciliation_breaks
             DROP COLUMN previous_id,
             ADD CONSTRAINT reconciliation_breaks_break_key_key UNIQUE (break_key)"""
    )
