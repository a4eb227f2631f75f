"""Less WAL per settlement: room on each page for a row's next version, and no index that
nothing reads.

An UPDATE whose new row version fits on the row's own page logs only the bytes that changed;
one that must move to another page logs the whole row again. And when no index covers a
changed column (in its key or in its WHERE), the update is heap-only (HOT): no index gets a
new entry either. Rows here are updated within seconds of their insert (a settlement moves
three times, its instruction twice, an outbox row and an inbox row once each), while the
tail page they were inserted into is still in memory, so a fill factor below 100 keeps that
room free for them. Settlements and instructions stay for years: 70, the room for a version
or two per row while page pruning clears the dead ones. Outbox rows are deleted once
published and inbox rows are wide: 50.

The dropped indexes are read by no statement in services/ or tools/:
- `settlements_tenant_status` (tenant, status, id): every status change had to add an entry
  to it and to each other index; without it, a move that leaves rail_reference alone is
  HOT. Lists by tenant read `settlements_reference_unique` (tenant, reference), and the
  review queue and rechecks filter on status without a tenant, which this index never served.
- `outbox_published_at`: the prune reads the oldest published rows in id order (the primary
  key), where they are first.
- `outbox_unpublished_by_settlement`: the claim's "no earlier unpublished event" test reads
  `outbox_sequence_unique` (settlement_id, sequence), a handful of rows per settlement.
- `rail_instructions_rail_reference`: webhooks find their settlement by
  `settlements.rail_reference`; no statement looks an instruction up by its reference.

Safe on a large database: a fill factor applies to pages filled from now on (no rewrite; a
SHARE UPDATE EXCLUSIVE lock, writes go on), and dropping an index takes a brief ACCESS
EXCLUSIVE lock on its table without reading it. The downgrade rebuilds the indexes with a
plain CREATE INDEX, which blocks writes to the table while it reads it (minutes at tens of
millions of rows).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FILL_FACTORS = {
    "settlements": 70,
    "rail_instructions": 70,
    "outbox": 50,
    "inbox_events": 50,
    "account_balances": 50,  # a few hot rows, each updated by every settlement of its account
}

DROPPED_INDEXES = {
    "settlements_tenant_status": "settlements (tenant, status, id)",
    "outbox_published_at": "outbox (published_at) WHERE published_at IS NOT NULL",
    "outbox_unpublished_by_settlement": """outbox (settlement_id, sequence)
                                           WHERE published_at IS NULL""",
    "rail_instructions_rail_reference": """rail_instructions (rail_reference)
                                           WHERE rail_reference IS NOT NULL""",
}


def upgrade() -> None:
    for table, percent in FILL_FACTORS.items():
        op.execute(f"ALTER TABLE {table} SET (fillfactor = {percent})")
    for name in DROPPED_INDEXES:
        op.execute(f"DROP INDEX {name}")


def downgrade() -> None:
    for name, definition in DROPPED_INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON {definition}")
    for table in FILL_FACTORS:
        op.execute(f"ALTER TABLE {table} RESET (fillfactor)")
