"""The live replicas of a service: `service_replicas`, so the ledger's rates hold across them.

Each ledger process keeps one row, `(service, replica_id)`, and stamps its `seen_at` on a
heartbeat (every few seconds, never per request); it counts the rows stamped within the last
few heartbeats as the live replicas and takes its share of every tenant's rate by their
number (services/ledger/replicas.py). A process deletes its row when it stops cleanly; a
crashed one's row drops out of the count once its stamp is old, and is deleted by a later
heartbeat of another.

The table is small (a row a replica) and written by heartbeats only, so it needs no index
beyond its key. `settle_ledger` may read, add, stamp and delete its rows.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-11
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = """
CREATE TABLE service_replicas (
    service text NOT NULL,
    replica_id text NOT NULL,
    seen_at timestamptz NOT NULL,
    PRIMARY KEY (service, replica_id),
    CONSTRAINT service_replicas_named CHECK (service <> '' AND replica_id <> '')
)
"""
GRANT = "GRANT SELECT, INSERT, DELETE, UPDATE (seen_at) ON service_replicas TO settle_ledger"


def upgrade() -> None:
    op.execute(TABLE)
    op.execute(GRANT)


def downgrade() -> None:
    op.execute("DROP TABLE service_replicas")
