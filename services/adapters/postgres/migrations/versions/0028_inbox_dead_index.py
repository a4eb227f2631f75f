"""An index of the dead inbox events alone, so the inbox can say how many there are each second.

The inbox's worker exports `settle_inbox_dead_events`, the events given up and waiting for an
operator, from `SELECT count(*) FROM inbox_events WHERE status = 'dead'`, sampled every second
beside the oldest parked event (which the pending index already answers). This partial index
holds only the dead rows, a handful, so the count reads it and never the table; a replay takes
its row out of it.

`inbox_events` is partitioned by month (0012): the index is made on the partitioned table, so
PostgreSQL makes it on every partition and on each month made later. It is built with a plain
CREATE INDEX, which reads each partition once and blocks writes to it meanwhile (SHARE lock):
on a large inbox, run it in a quiet minute.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-12
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE INDEX inbox_events_dead ON inbox_events (received_at) WHERE status = 'dead'")


def downgrade() -> None:
    op.execute("DROP INDEX inbox_events_dead")
