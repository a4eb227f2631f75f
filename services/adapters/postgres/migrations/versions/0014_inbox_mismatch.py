"""Webhooks that do not match what was sent: inbox status `mismatch`, and both sides kept.

An event whose object differs from its settlement in amount, currency, destination, account
or object (`services/domain/webhook_match.py`) is never applied: its row ends in the
new status `mismatch`, with the reason and a new column, `mismatch` (jsonb), holding
[{"field", "expected", "received"}, ...], one item per differing field. A CHECK holds a
mismatch to both.

`inbox_events` is partitioned by month (0012): the column and the constraints are changed on
the partitioned table, and PostgreSQL carries them to every partition, and to each month made
later (`settle_month_partition` copies the parent's constraints). The column has no default,
so adding it rewrites nothing. Both constraints are added NOT VALID, so no partition is
scanned under the table's ACCESS EXCLUSIVE lock: every row written from now on is checked,
and the rows already there hold by construction (the status check only widens the one it
replaces, and no row can be in `mismatch` yet). `ALTER TABLE inbox_events VALIDATE
CONSTRAINT ...` proves it later without blocking writes, if wanted.

The downgrade refuses while a row is in `mismatch`: under the old statuses it could only be
`dead`, which an operator may replay into an apply, and a mismatch must never be applied.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUSES = "'received', 'applied', 'ignored', 'parked', 'dead', 'rejected'"
STATUS_CHECK = "inbox_events_status_check"
MISMATCH_CHECK = "inbox_events_mismatch_sides"


def _status_check(statuses: str, valid: str) -> list[str]:
    return [
        f"ALTER TABLE inbox_events DROP CONSTRAINT {STATUS_CHECK}",
        f"ALTER TABLE inbox_events ADD CONSTRAINT {STATUS_CHECK}"
        f" CHECK (status IN ({statuses})){valid}",
    ]


def upgrade() -> None:
    # Every operand is tested for NULL first: a CHECK that comes to NULL passes.
    op.execute("ALTER TABLE inbox_events ADD COLUMN mismatch jsonb")
    for statement in _status_check(f"{OLD_STATUSES}, 'mismatch'", " NOT VALID"):
        op.execute(statement)
    op.execute(
        f"""ALTER TABLE inbox_events ADD CONSTRAINT {MISMATCH_CHECK}
              CHECK (status <> 'mismatch' OR (reason IS NOT NULL AND mismatch IS NOT NULL
                     AND jsonb_typeof(mismatch) = 'array' AND mismatch <> '[]'::jsonb))
              NOT VALID"""
    )


def downgrade() -> None:
    op.execute(
        """DO $$ BEGIN
              IF EXISTS (SELECT 1 FROM inbox_events WHERE status = 'mismatch') THEN
                  RAISE EXCEPTION 'inbox events in mismatch: resolve or archive them first'
                      USING ERRCODE = 'object_in_use';
              END IF;
            END $$"""
    )
    op.execute(f"ALTER TABLE inbox_events DROP CONSTRAINT {MISMATCH_CHECK}")
    for statement in _status_check(OLD_STATUSES, ""):
        op.execute(statement)
    op.execute("ALTER TABLE inbox_events DROP COLUMN mismatch")
