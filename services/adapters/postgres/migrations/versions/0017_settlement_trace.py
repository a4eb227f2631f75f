"""Each settlement keeps the W3C trace context it was accepted under.

`settlements` gains `traceparent` and `tracestate` (text, nullable, no default): the context
of the ledger's accept span, written by the booking statement itself, so it costs no extra
round trip or statement. The relay puts it on every Kafka event of the settlement and runs
the rail call in a span child of it; the inbox logs under it (`services/platform/tracing.py`).

Write cost: a traceparent is 55 bytes, in the row that booking inserts and each transition
rewrites (heap-only, as no index holds it), so a few hundred bytes of WAL per settlement;
`tracestate` is NULL unless the caller sent one, and a NULL costs nothing beyond the null
bitmap the row already has. No index: nothing looks a settlement up by its trace; a trace
id is found in the log lines, which name the settlement.

Adding nullable columns without a default rewrites nothing; the brief ACCESS EXCLUSIVE lock
reads no row. Settlements booked before it have no trace (NULL), and their events go out
without the headers. The downgrade drops both columns.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("ALTER TABLE settlements ADD COLUMN traceparent text, ADD COLUMN tracestate text")


def downgrade() -> None:
    op.execute("ALTER TABLE settlements DROP COLUMN traceparent, DROP COLUMN tracestate")
