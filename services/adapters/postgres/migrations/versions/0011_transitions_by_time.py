"""An index on when transitions happened, so reconciliation's window reads only its window.

Reconciliation's intraday window is the settlements changed since the last run: until now
`settlements WHERE updated_at >= since`, with no index on `updated_at` (one would make every
status move a non-HOT update, which migration 0008 removed), so each run read the whole
settlements table: a pre-filled million settlements cost 2.4 ms of PostgreSQL per new
settlement at 100/s, and ten million would cost ten times that. Every change of a settlement
writes a transition stamped with the same time as its `updated_at` (the one guarded write
path; booking writes `accepted`), so the settlements changed since a time are those with a
transition since then. Transitions are append-only and written in time order, so the B-tree
grows at its right edge only. A B-tree, not a BRIN: the planner reads the newest value from
it, so it knows how many rows the last seconds hold even before statistics see them; without
that it takes the window for one row and joins it row by row with the rail's staged objects.

On the partitioned table it is created on each month's partition (and on each month attached
later). Building it reads `settlement_transitions` once and blocks writes meanwhile (SHARE
lock): on a large database, run it in a quiet minute.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX settlement_transitions_occurred_at ON settlement_transitions (occurred_at)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX settlement_transitions_occurred_at")
