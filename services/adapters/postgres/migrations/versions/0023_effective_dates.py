"""A journal entry says when the money moved, beside when settle recorded it.

`journal_entries.effective_at` is the rail's time of the movement, where the rail said: a
webhook's (or a heal's balance transaction's) `created`, a bank statement's booking date, a
fee's balance transaction. It is NULL where settle's own time is the movement's (a booking,
a dispatch), and readers take `coalesce(effective_at, occurred_at)`. A reversal on the 31st
that is recorded on the 1st thus belongs to the 31st in every cut by date (the nostro view's,
the ledger's reads).

The column is nullable with no default, so adding it rewrites nothing (a catalog change under
a brief lock). The guarded write's `entry_row` gains the attribute.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE journal_entries ADD COLUMN effective_at timestamptz")
    op.execute("ALTER TYPE entry_row ADD ATTRIBUTE effective_at timestamptz")


def downgrade() -> None:
    op.execute("ALTER TYPE entry_row DROP ATTRIBUTE effective_at")
    op.execute("ALTER TABLE journal_entries DROP COLUMN effective_at")
