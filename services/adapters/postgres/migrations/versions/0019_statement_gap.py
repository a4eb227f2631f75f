"""A break of its own for a bank statement that does not follow the one before it.

`reconciliation_breaks.break_type` may now be `statement_gap`: a statement whose electronic
or legal sequence number skips one, or whose opening balance is not the previous statement's
closing one. Each statement of the SEPA rail's bank account must follow the last; a gap means
a statement not received (its bookings unseen), and the break heals when it arrives.

The CHECK is replaced in place: PostgreSQL validates the new one against the existing rows (a
scan of the breaks table, under its lock; the old types all pass). The downgrade restores the
old list; it fails while a `statement_gap` row exists.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
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
)
AFTER = (*BEFORE, "statement_gap")


def _check(types: Sequence[str]) -> str:
    listed = ", ".join(f"'{t}'" for t in types)
    return f"""
    ALTER TABLE reconciliation_breaks
     DROP CONSTRAINT reconciliation_breaks_break_type_check,
      ADD CONSTRAINT reconciliation_breaks_break_type_check CHECK (break_type IN ({listed}))
    """


def upgrade() -> None:
    op.execute(_check(AFTER))


def downgrade() -> None:
    op.execute(_check(BEFORE))
