"""The two-person rule held by the database: `operator_policy`, and the audit rows it guards.

`operator_policy` is one row: whether two-person mode is on. A database first migrated in
production mode (`settle migrate` with SETTLE_ENV=production) starts with it on; a local one
with it off. While it is on, `operator_actions` refuses a row of an action that moves money or
closes a break (the actions maker-checker holds for a second operator) without `approved_by`,
whatever the server or the command that writes it believes: a process configured without the
second person, or a role that writes the table directly, cannot act alone. Self-approval is
refused as before (migration 0016's CHECK).

The mode is turned on by any operator (an audited action), and turned off only by an
audited action a second operator approved: the row's `changed_by_action` names that audit
row, and an update that turns the mode off without naming one is refused.

The lists of actions below are a snapshot of the actions at this revision, on purpose:
a migration must not follow a list that later code may change.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-11
"""

from collections.abc import Sequence

from alembic import context, op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The audit actions two-person mode holds for a second operator.
GUARDED_ACTIONS = (
    "review.resolve",
    "break.resolve",
    "inbox.replay",
    "break.write_off",
    "break.adjust",
    "break.correct",
    "break.match",
    "policy.two_person",
)
# What a proposal may propose, before and after this revision (0022's list, then the policy).
BEFORE = GUARDED_ACTIONS[:-1]


def _proposable(actions: Sequence[str], valid: bool) -> str:
    listed = ", ".join(f"'{a}'" for a in actions)
    return f"""
    ALTER TABLE operator_proposals
     DROP CONSTRAINT operator_proposals_action_check,
      ADD CONSTRAINT operator_proposals_action_check CHECK (action IN ({listed}))
          {"" if valid else "NOT VALID"}
    """


# `settle migrate` says whether the database is a production one (alembic attributes).
PRODUCTION = "production"

UPGRADE = [
    """
    CREATE TABLE operator_policy (
        only_row          boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        two_person        boolean NOT NULL,
        changed_at        timestamptz NOT NULL DEFAULT now(),
        changed_by_action bigint
    )
    """,
    f"""
    CREATE FUNCTION settle_two_person_guard() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    BEGIN
        IF NEW.approved_by IS NULL
           AND NEW.action = ANY (ARRAY{list(GUARDED_ACTIONS)}::text[])
           AND (SELECT two_person FROM public.operator_policy) THEN
            RAISE EXCEPTION 'two-person mode is on: % needs a second operator''s approval',
                NEW.action USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END $$
    """,
    """CREATE TRIGGER operator_actions_two_person BEFORE INSERT ON operator_actions
       FOR EACH ROW EXECUTE FUNCTION settle_two_person_guard()""",
    """
    CREATE FUNCTION settle_policy_guard() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            RAISE EXCEPTION 'operator_policy keeps its one row' USING ERRCODE = 'check_violation';
        END IF;
        IF OLD.two_person AND NOT NEW.two_person AND NOT EXISTS (
            SELECT 1 FROM public.operator_actions
             WHERE id = NEW.changed_by_action AND action = 'policy.two_person'
               AND approved_by IS NOT NULL) THEN
            RAISE EXCEPTION 'two-person mode is turned off only by an action a second '
                'operator approved' USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END $$
    """,
    """CREATE TRIGGER operator_policy_guard BEFORE UPDATE OR DELETE ON operator_policy
       FOR EACH ROW EXECUTE FUNCTION settle_policy_guard()""",
    # A wider list holds for every row already there: nothing to scan.
    _proposable(GUARDED_ACTIONS, valid=False),
]
# The operators' server (the reconciler's operator API) changes the mode; the console reads it.
GRANTS = [
    "GRANT SELECT, UPDATE (two_person, changed_at, changed_by_action) ON operator_policy "
    "TO settle_reconciler",
    "GRANT SELECT ON operator_policy TO settle_console, settle_inbox",
]
DOWNGRADE = [
    "DELETE FROM operator_proposals WHERE action = 'policy.two_person'",
    _proposable(BEFORE, valid=True),
    "DROP TRIGGER operator_policy_guard ON operator_policy",
    "DROP FUNCTION settle_policy_guard()",
    "DROP TRIGGER operator_actions_two_person ON operator_actions",
    "DROP FUNCTION settle_two_person_guard()",
    "DROP TABLE operator_policy",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)
    production = bool(context.config.attributes.get(PRODUCTION, False))
    op.execute(f"INSERT INTO operator_policy (two_person) VALUES ({str(production).lower()})")
    for statement in GRANTS:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
