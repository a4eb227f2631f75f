"""Reconciliation's staging of the rail: the objects a run lists, held in PostgreSQL instead of
in the run's memory, so a run over a million objects needs no more memory than one over a
thousand. UNLOGGED: the rows are a copy of what the rail says, good only while their run
lasts (a crash loses them, and the run they belong to is over then anyway). A run deletes its
rows when it ends; the next run deletes those a crashed run left.

No primary key: the rail may list an object twice (it changed while the run paged), and a
run reads the last version it staged, as it would read a list. Joined with the settlements
by hash, a whole run at a time; looked up by object id only for the few a settlement outside
the window names, so one index.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = [
    """
    CREATE UNLOGGED TABLE reconciliation_rail_staging (
        run_id          bigint NOT NULL,
        seq             bigint NOT NULL,  -- the order staged in: a later copy wins
        listed          boolean NOT NULL,  -- listed in the window (else retrieved by id)
        object_id       text NOT NULL,
        kind            text NOT NULL,
        amount          bigint NOT NULL,
        amount_reversed bigint NOT NULL,
        currency        text NOT NULL,
        destination     text,
        status          text,
        created         bigint NOT NULL,
        settlement_id   text  -- as the metadata names it: anything, not only a UUID
    )
    """,
    """CREATE INDEX reconciliation_rail_staging_object
       ON reconciliation_rail_staging (run_id, object_id)""",
]
DOWNGRADE = ["DROP TABLE reconciliation_rail_staging"]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
