"""Operators work on reconciliation breaks: who has one, what they noted, how they closed it,
and the actions that correct the books from one, proposed under maker-checker.

`reconciliation_breaks` gains `assignee` (the operator working on the break) and
`resolution_kind` (how an operator resolved it: `resolve`, with a sentence; `write_off`, its
amount booked to the platform's loss account; `correct`, its settlement moved where the rail
shows it; `match`, its rail object recorded as a settlement's reference). A healed break, and
every break resolved before this, has none; a reopened break loses its kind with its
resolution.

`reconciliation_break_comments`: the operators' notes on a break, one row each, which only
grow (`settle_append_only`, as postings), so the service role may only read and add them.
They outlive the audit rows that record them, whose months are archived.

`operator_proposals.action` may now also be `break.write_off`, `break.adjust`,
`break.correct` and `break.match`; assigning, commenting and reopening are never proposed.

Zero-downtime: two nullable columns without default (no row rewritten, no row read), a new
table, and CHECK constraints added NOT VALID, so no table is scanned under its lock: every
existing row holds them by construction (the new columns are NULL; the proposals' allowed
actions only grow). The downgrade fails while a proposal of a new action exists.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BEFORE = ("review.resolve", "break.resolve", "inbox.replay")
AFTER = (*BEFORE, "break.write_off", "break.adjust", "break.correct", "break.match")
KINDS = ("resolve", "write_off", "correct", "match")


def _actions(actions: Sequence[str], valid: bool) -> str:
    listed = ", ".join(f"'{a}'" for a in actions)
    return f"""
    ALTER TABLE operator_proposals
     DROP CONSTRAINT operator_proposals_action_check,
      ADD CONSTRAINT operator_proposals_action_check CHECK (action IN ({listed}))
          {"" if valid else "NOT VALID"}
    """


UPGRADE = [
    """ALTER TABLE reconciliation_breaks
         ADD COLUMN assignee text,
         ADD COLUMN resolution_kind text""",
    """ALTER TABLE reconciliation_breaks
         ADD CONSTRAINT reconciliation_breaks_assignee
             CHECK (assignee IS NULL OR length(btrim(assignee)) BETWEEN 1 AND 128) NOT VALID,
         ADD CONSTRAINT reconciliation_breaks_resolution_kind
             CHECK (resolution_kind IS NULL
                    OR (status = 'resolved' AND resolution_kind IN ({kinds}))) NOT VALID""".format(
        kinds=", ".join(f"'{k}'" for k in KINDS)
    ),
    """
    CREATE TABLE reconciliation_break_comments (
        id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        break_id   bigint NOT NULL REFERENCES reconciliation_breaks (id),
        author     text NOT NULL CHECK (length(author) BETWEEN 1 AND 128),
        body       text NOT NULL CHECK (length(btrim(body)) > 0 AND length(body) <= 4000),
        written_at timestamptz NOT NULL
    )
    """,
    """CREATE INDEX reconciliation_break_comments_break
           ON reconciliation_break_comments (break_id, id)""",
    """CREATE TRIGGER reconciliation_break_comments_append_only
           BEFORE UPDATE OR DELETE ON reconciliation_break_comments
           FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    _actions(AFTER, valid=False),
]

DOWNGRADE = [
    _actions(BEFORE, valid=True),
    "DROP TABLE reconciliation_break_comments",
    """ALTER TABLE reconciliation_breaks
         DROP COLUMN resolution_kind,
         DROP COLUMN assignee""",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
