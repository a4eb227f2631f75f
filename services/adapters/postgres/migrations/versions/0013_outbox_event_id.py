"""Less WAL per settlement: the outbox keeps no unique index on `event_id`.

Every outbox row wrote an entry to it on insert and another when the relay marked it
published (that update cannot be heap-only: `published_at` is in the unpublished index's
predicate), about 500 bytes of WAL per settlement, 3.7% of the e2e total at 100/s. No
statement reads an outbox row by its `event_id`, and the index never made an event id unique
where consumers need it: an id is a fresh UUIDv7 per row (booking.py, transitions.py), rows
are pruned an hour after they are published, and consumers dedupe on ids far older than that.
What orders and dedupes the outbox itself is `outbox_sequence_unique` (settlement_id,
sequence), which stays.

Dropping the constraint takes a brief ACCESS EXCLUSIVE lock on the outbox without reading
it. The downgrade builds the unique index again (reading the outbox: small, as it is pruned).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE outbox DROP CONSTRAINT outbox_event_id_key")


def downgrade() -> None:
    op.execute("ALTER TABLE outbox ADD CONSTRAINT outbox_event_id_key UNIQUE (event_id)")
