"""Less WAL per event: an outbox row is deleted by the transaction that publishes it.

The relay used to mark a published row (`published_at`) and prune it an hour later: three
writes per event (insert, update, delete) and a partial index of the unpublished rows beside
the primary key. Now the claiming statement deletes the rows it claims, in the transaction
that commits only once Kafka acknowledged every one of them, so a crash or a Kafka failure
before that rolls the delete back and the rows go out again under the same `event_id`: two
writes per event, and every row left in the table is unpublished, so the partial index says
nothing the primary key does not.

`published_at` stays for the rows an older relay marks while the two run side by side during
an upgrade: the claim still skips marked rows and the relay's prune still clears them.

Dropping the index takes a brief ACCESS EXCLUSIVE lock on the outbox without reading it. The
downgrade builds it again with a plain CREATE INDEX (the outbox holds only what is waiting).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-14
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DROP INDEX outbox_unpublished")


def downgrade() -> None:
    op.execute("CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL")
