"""What the rails charged settle, each charge booked once; the day a payment file asks the
bank to book its transfers.

`rail_charges` keeps each charge a rail took from settle's own account (a bank's fee entry on
its statement) under the rail's own reference for it, with the journal entry that booked it
from the platform's funding to its `rail_fees` account. The reference's primary key is what
books a charge once, however many times the statement that shows it is read. The charged
transfer's EndToEndId is kept where the rail names it, for the lineage.

`bank_files.execution_date` is the file's requested execution date: the business day the bank
is expected to book its transfers, before which reconciliation calls a transfer not yet on a
statement pending, not missing. Files built before this have none (they fall back on the
grace period).

A new table and a nullable column without default, whose brief lock reads no row; the
downgrade drops both (the journal entries the table names stay, balanced).

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
    op.execute("ALTER TABLE bank_files ADD COLUMN execution_date date")


def downgrade() -> None:
    op.execute("ALTER TABLE bank_files DROP COLUMN execution_date")
    op.execute("DROP TABLE rail_charges")
