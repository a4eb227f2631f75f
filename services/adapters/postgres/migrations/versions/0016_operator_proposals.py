"""Maker-checker: operator actions proposed by one operator and decided by another.

`operator_proposals` holds one row per proposed action (a review resolution, a break
resolution, a webhook replay): what, on what, why, who proposed it and when, and how it was
decided (`services/domain/proposal.py` is its state machine):

    pending    waiting for a second operator
    approved   a different operator approved it and the action was done (`outcome`)
    rejected   a different operator refused it
    withdrawn  its proposer took it back
    failed     a different operator approved it, the action was refused (`outcome` says why)
    expired    nobody decided it in time

The table holds what the code also checks, so no writer can get it wrong: approved, rejected
and failed are decided by someone other than the proposer, withdrawn by the proposer, expired
by nobody; at most one proposal per action and target is pending (a partial unique index); a
decided proposal is final and no proposal is deleted (a trigger).

`operator_actions` gains `approved_by`: the second operator of an action done under
maker-checker (the audit row's `actor` is the proposer), NULL for an action one operator did.
The table stays append-only (0004's trigger); the column has no default, so adding it to the
partitioned table rewrites nothing, and its CHECK is added NOT VALID (no partition scanned:
every existing row has no approver, so it holds by construction).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Every operand is tested for NULL first: a CHECK that comes to NULL passes.
UPGRADE = [
    """
    CREATE TABLE operator_proposals (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        action      text NOT NULL
                    CHECK (action IN ('review.resolve', 'break.resolve', 'inbox.replay')),
        target      text NOT NULL CHECK (target <> ''),
        payload     jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(payload) = 'object'),
        reason      text CHECK (reason IS NULL OR btrim(reason) <> ''),
        proposed_by text NOT NULL CHECK (proposed_by <> ''),
        proposed_at timestamptz NOT NULL,
        status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved',
                        'rejected', 'withdrawn', 'failed', 'expired')),
        decided_by  text,
        decided_at  timestamptz,
        outcome     jsonb,
        -- A resolution says why; a replay may.
        CHECK (action = 'inbox.replay' OR reason IS NOT NULL),
        CHECK (CASE status
                 WHEN 'pending' THEN decided_by IS NULL AND decided_at IS NULL
                                     AND outcome IS NULL
                 WHEN 'expired' THEN decided_by IS NULL AND decided_at IS NOT NULL
                 WHEN 'withdrawn' THEN decided_by IS NOT NULL AND decided_by = proposed_by
                                       AND decided_at IS NOT NULL
                 ELSE decided_by IS NOT NULL AND decided_by <> proposed_by
                      AND decided_at IS NOT NULL
               END),
        CHECK (status NOT IN ('approved', 'failed') OR outcome IS NOT NULL),
        CHECK (decided_at IS NULL OR decided_at >= proposed_at)
    )
    """,
    """CREATE UNIQUE INDEX operator_proposals_one_pending ON operator_proposals (action, target)
       WHERE status = 'pending'""",
    # The queue a second operator reads: the pending ones by id, without the decided ones.
    "CREATE INDEX operator_proposals_pending ON operator_proposals (id) WHERE status = 'pending'",
    """
    CREATE FUNCTION settle_proposal_decided_once() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            RAISE EXCEPTION 'operator_proposals keeps every proposal'
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF OLD.status <> 'pending' THEN
            RAISE EXCEPTION 'proposal % is % already: a decision is final', OLD.id, OLD.status
                USING ERRCODE = 'restrict_violation';
        END IF;
        IF (NEW.action, NEW.target, NEW.payload, NEW.reason, NEW.proposed_by, NEW.proposed_at)
           IS DISTINCT FROM
           (OLD.action, OLD.target, OLD.payload, OLD.reason, OLD.proposed_by, OLD.proposed_at)
        THEN
            RAISE EXCEPTION 'proposal %: what was proposed is never changed', OLD.id
                USING ERRCODE = 'restrict_violation';
        END IF;
        RETURN NEW;
    END $$
    """,
    """CREATE TRIGGER operator_proposals_decided_once BEFORE UPDATE OR DELETE
       ON operator_proposals FOR EACH ROW EXECUTE FUNCTION settle_proposal_decided_once()""",
    "ALTER TABLE operator_actions ADD COLUMN approved_by text",
    """ALTER TABLE operator_actions ADD CONSTRAINT operator_actions_two_operators
       CHECK (approved_by IS NULL OR (approved_by <> '' AND approved_by <> actor)) NOT VALID""",
]

DOWNGRADE = [
    "ALTER TABLE operator_actions DROP CONSTRAINT operator_actions_two_operators",
    "ALTER TABLE operator_actions DROP COLUMN approved_by",
    "DROP TABLE operator_proposals",
    "DROP FUNCTION settle_proposal_decided_once()",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
