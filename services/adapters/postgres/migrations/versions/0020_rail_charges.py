"""What the rails charged settle, each charge booked once.

`rail_charges` keeps each charge a rail took from settle's own account (a bank's fee entry on
its statement) under the rail's own reference for it, with the journal entry that booked it
from the platform's funding to its `rail_fees` account. The reference's primary key is what
books a charge once, however many times the statement that shows it is read. The charged
transfer's EndToEndId is kept where the rail names it, for the lineage.

A new table; the downgrade drops it (the journal entries it names stay, balanced).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE rail_charges (
            rail          text NOT NULL,
            reference     text NOT NULL CHECK (length(reference) BETWEEN 1 AND 255),
            entry_id      uuid NOT NULL UNIQUE
                          REFERENCES journal_entries (id) DEFERRABLE INITIALLY DEFERRED,
            amount        bigint NOT NULL CHECK (amount > 0),
            currency      char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
            charged_on    date NOT NULL,
            end_to_end_id text,
            recorded_at   timestamptz NOT NULL,
            PRIMARY KEY (rail, reference)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE rail_charges")
