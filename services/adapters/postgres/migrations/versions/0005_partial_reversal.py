"""Partial reversals: a settlement knows how much of it came back, and `partly_reversed`.

`settlements.amount_reversed` is the cumulative amount the rail took back, in minor units;
the database keeps it in 0 .. amount and ties it to the status: `reversed` exactly when all
of it is back, `partly_reversed` exactly when some but not all is. Settlements reversed
before this revision were reversed in full, so they start with their whole amount back.
`settlement_move` (the guarded write's row type) carries the amount reversed after the
batch. `inbox_events.amount_reversed` keeps what a reversal event reported (the transfer's
cumulative `amount_reversed`, or a returned payout's whole amount), so the worker decides
without reading the body again.

Downgrading refuses while a settlement is partly reversed (the old status check has no
word for it).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = "'accepted', 'dispatching', 'submitted', 'paid', 'failed', 'reversed', 'needs_review'"

UPGRADE = [
    "ALTER TABLE settlements DROP CONSTRAINT settlements_status_check",
    f"""ALTER TABLE settlements ADD CONSTRAINT settlements_status_check
        CHECK (status IN ({STATUSES}, 'partly_reversed'))""",
    "ALTER TABLE settlements ADD COLUMN amount_reversed bigint NOT NULL DEFAULT 0",
    # Filled by the table's rewrite, not an UPDATE: only the guarded write path updates rows.
    """ALTER TABLE settlements ALTER COLUMN amount_reversed TYPE bigint
        USING CASE WHEN status = 'reversed' THEN amount ELSE 0 END""",
    """ALTER TABLE settlements ADD CONSTRAINT settlements_amount_reversed
        CHECK (amount_reversed BETWEEN 0 AND amount
               AND (status = 'reversed') = (amount_reversed = amount)
               AND (status = 'partly_reversed') = (amount_reversed BETWEEN 1 AND amount - 1))""",
    "ALTER TYPE settlement_move ADD ATTRIBUTE amount_reversed bigint",
    """ALTER TABLE inbox_events ADD COLUMN amount_reversed bigint
        CHECK (amount_reversed > 0)""",
]

DOWNGRADE = [
    "ALTER TABLE inbox_events DROP COLUMN amount_reversed",
    "ALTER TYPE settlement_move DROP ATTRIBUTE amount_reversed",
    "ALTER TABLE settlements DROP CONSTRAINT settlements_amount_reversed",
    "ALTER TABLE settlements DROP COLUMN amount_reversed",
    "ALTER TABLE settlements DROP CONSTRAINT settlements_status_check",
    f"""ALTER TABLE settlements ADD CONSTRAINT settlements_status_check
        CHECK (status IN ({STATUSES}))""",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
