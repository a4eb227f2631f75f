"""Balanced journal entries checked once per statement, not once per posting at commit.

Until now a deferred row trigger looked up, at commit, every posting's whole entry: one
lookup per posting (about six per settlement). Every writer in services/ inserts an entry's
postings together, in the one statement that books or moves its settlements. So the check
now runs once per INSERT into postings, over that statement's new rows alone (its transition
table): where those sum to zero per entry and currency, no entry changed balance, and an
entry that balanced before (as every committed one does) balances still (postings are
append-only, so nothing else moves a sum). No lookup of stored postings is needed for them.
A statement-level trigger also fires for a transition write that adds no postings (a move
to dispatching): an empty transition table, read in tens of microseconds. At 250
settlements/s in e2e that is about half a check per settlement, against 5.6 (one per
posting) before.

An entry whose postings in one statement do not sum to zero (a writer that inserts an
entry's legs one statement at a time, as raw SQL may) is not refused there: it is noted in
`entries_to_balance`, whose deferred row trigger checks that entry's stored postings at
commit, as before, and removes the note. So no commit leaves an unbalanced entry, whatever
writes the postings, and the error stays the same (check_violation, "journal entry ... does
not balance", raised at commit). The note table is empty outside such a transaction.

Safe on a large database: the new table is empty, the triggers only change what later
inserts do; changing the triggers takes a brief SHARE ROW EXCLUSIVE lock on `postings`
(writes wait, reads go on) and reads none of it.
The downgrade restores the per-posting deferred trigger.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = [
    "DROP TRIGGER postings_balance ON postings",
    # Entries a statement left unbalanced, to be checked at commit; no foreign key, so noting
    # one costs no lookup of journal_entries.
    "CREATE TABLE entries_to_balance (entry_id uuid PRIMARY KEY)",
    """
    CREATE FUNCTION settle_statement_entries_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO entries_to_balance (entry_id)
        SELECT DISTINCT entry_id FROM new_postings
         GROUP BY entry_id, currency HAVING sum(amount) <> 0
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER postings_balance_per_statement AFTER INSERT ON postings
        REFERENCING NEW TABLE AS new_postings
        FOR EACH STATEMENT EXECUTE FUNCTION settle_statement_entries_balanced()
    """,
    """
    CREATE FUNCTION settle_noted_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM postings WHERE entry_id = NEW.entry_id
                   GROUP BY currency HAVING sum(amount) <> 0) THEN
            RAISE EXCEPTION 'journal entry % does not balance', NEW.entry_id
                USING ERRCODE = 'check_violation';
        END IF;
        -- Gone, so a later unbalanced statement in this transaction notes it again.
        DELETE FROM entries_to_balance WHERE entry_id = NEW.entry_id;
        RETURN NULL;
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER entries_to_balance_at_commit AFTER INSERT ON entries_to_balance
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settle_noted_entry_balanced()
    """,
]

DOWNGRADE = [
    "DROP TRIGGER postings_balance_per_statement ON postings",
    "DROP FUNCTION settle_statement_entries_balanced()",
    "DROP TABLE entries_to_balance",
    "DROP FUNCTION settle_noted_entry_balanced()",
    """
    CREATE CONSTRAINT TRIGGER postings_balance AFTER INSERT ON postings
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settle_entry_balanced()
    """,
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
