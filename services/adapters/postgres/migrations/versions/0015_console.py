"""The console's sign-in sessions, and the indexes its searches and queues read.

`console_sessions`: one row per signed-in operator session, keyed by the SHA-256 of the
random session id the cookie holds (a copy of the table signs nobody in); `last_seen_at`
ends it after the idle limit, `created_at` after the absolute one; logout deletes it.

Indexes, and what each costs on the write path:
- `settlements_payee` (payee, id), `settlements_destination` (destination, id): the console
  finds settlements by payee or destination, a keyset page at a time. Neither column ever
  changes, and no status move touches them, so status moves stay heap-only (HOT, migration
  0008); a settlement's insert writes two more index entries, and its one non-HOT update
  (when the rail reference is recorded) two more.
- `operator_actions_target` (target, id): a settlement's page lists the actions about it, and
  the audit page filters by target. The table is append-only and written by operators and
  reconciliation's heals only: one entry per audit row, none on any settlement's path.
- `settlement_transitions_into_review` (settlement_id) holding only transitions into
  `needs_review`: the review queue (console, CLI and HTTP alike) and the overview's count of
  it walk the settlements ever referred, not the whole table; an index on the settlements'
  status would make every status move a non-HOT update (migration 0008). The table is
  append-only and a transition gets an entry only when it goes to review: nothing on the
  path of a settlement paid. A settlement under review is never archived (its month is
  refused, services/operations/archive.py), so its transition into review stays attached.
- `inbox_events_unsettled` (status, id) holding only parked, dead and mismatch rows: the
  webhook queues page through them by id. `status` is already a key of
  `inbox_events_pending`, so no update that was heap-only stops being so, and a row gets an
  entry only while it is parked, dead or mismatched: nothing on the path of a webhook applied.

Each index is built with a plain CREATE INDEX, which reads the table once and blocks writes
to it meanwhile (SHARE lock): on a large database, run it in a quiet minute (or build the
settlements' two by hand first with CREATE INDEX CONCURRENTLY under the same names).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = [
    """CREATE TABLE console_sessions (
           id_hash bytea PRIMARY KEY CHECK (length(id_hash) = 32),
           operator text NOT NULL CHECK (length(operator) BETWEEN 1 AND 128),
           created_at timestamptz NOT NULL,
           last_seen_at timestamptz NOT NULL,
           CHECK (created_at <= last_seen_at)
       )""",
    "CREATE INDEX IF NOT EXISTS settlements_payee ON settlements (payee, id)",
    "CREATE INDEX IF NOT EXISTS settlements_destination ON settlements (destination, id)",
    "CREATE INDEX operator_actions_target ON operator_actions (target, id)",
    """CREATE INDEX settlement_transitions_into_review ON settlement_transitions (settlement_id)
        WHERE to_status = 'needs_review'""",
    """CREATE INDEX inbox_events_unsettled ON inbox_events (status, id)
        WHERE status IN ('parked', 'dead', 'mismatch')""",
]
DOWNGRADE = [
    "DROP INDEX inbox_events_unsettled",
    "DROP INDEX settlement_transitions_into_review",
    "DROP INDEX operator_actions_target",
    "DROP INDEX settlements_destination",
    "DROP INDEX settlements_payee",
    "DROP TABLE console_sessions",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
