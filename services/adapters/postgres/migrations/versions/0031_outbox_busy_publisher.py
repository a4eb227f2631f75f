"""Writers wake a busy outbox publisher no more: `outbox_publishing`, and a trigger that
notifies only when no publisher promised to look again soon.

PostgreSQL serialises the commits of every transaction that sent a notification on one lock
(cluster-wide); under load, the outbox trigger's NOTIFY queued each writer's commit behind the
others'. A publisher whose wake-ups keep finding rows now stamps `busy_until` (a promise to
look again before then, services/relay/outbox_wake.py) and looks on its own clock; the
trigger reads that one row and notifies only when no promise stands.

The table is UNLOGGED (a promise is not worth a WAL record; after a crash it is empty, which
means no promise) and holds one row at most. The trigger function runs as its owner (SECURITY
DEFINER), so a writer's role needs no right on the table; `settle_relay` may stamp it.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-14
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "settle_outbox"
TABLE = """
CREATE UNLOGGED TABLE outbox_publishing (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    busy_until timestamptz NOT NULL
)
"""
NOTIFY_WHEN_IDLE = f"""
CREATE OR REPLACE FUNCTION settle_outbox_notify() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox_publishing WHERE busy_until > clock_timestamp()) THEN
        PERFORM pg_notify('{CHANNEL}', '');
    END IF;
    RETURN NULL;
END $$
"""
NOTIFY_ALWAYS = f"""
CREATE OR REPLACE FUNCTION settle_outbox_notify() RETURNS trigger
LANGUAGE plpgsql SECURITY INVOKER AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END $$
"""


def upgrade() -> None:
    op.execute(TABLE)
    op.execute("GRANT SELECT, INSERT, UPDATE (busy_until) ON outbox_publishing TO settle_relay")
    op.execute(NOTIFY_WHEN_IDLE)


def downgrade() -> None:
    op.execute(NOTIFY_ALWAYS)
    op.execute("DROP TABLE outbox_publishing")
