"""Wake outbox publishers: every statement that inserts outbox rows notifies `settle_outbox`.

PostgreSQL delivers the notification at commit (and folds repeats within a transaction), so
a publisher listening on the channel sees new rows within milliseconds of their commit,
whoever wrote them; publishers still poll as a fallback, since notifications are not stored.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "settle_outbox"


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION settle_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
           FOR EACH STATEMENT EXECUTE FUNCTION settle_outbox_notify()"""
    )
    # The publisher's claim looks for each settlement's earliest unpublished event.
    op.execute(
        """CREATE INDEX outbox_unpublished_by_settlement ON outbox (settlement_id, sequence)
           WHERE published_at IS NULL"""
    )


def downgrade() -> None:
    op.execute("DROP INDEX outbox_unpublished_by_settlement")
    op.execute("DROP TRIGGER outbox_notify ON outbox")
    op.execute("DROP FUNCTION settle_outbox_notify()")
