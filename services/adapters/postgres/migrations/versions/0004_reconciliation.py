"""Reconciliation's records: its runs with the evidence of each source read, the breaks it
found (one row per break across runs), and operator actions made append-only.

A run's evidence is final once the run is: the database refuses to change a finished run,
to add a source to it, or to delete either, and it refuses to mark a run `completed` that
read no source or whose sources report an error (an empty answer where data was expected is
an error, so it is never a clean run). A break's identity is its key (the text of
`services.domain.reconciliation.break_key`): a break seen again moves `last_seen`, it is not a new
row. `operator_actions` gains `before`/`after` and, like postings, refuses UPDATE and DELETE.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BREAK_TYPES = (
    "missing_at_rail",
    "unknown_at_rail",
    "duplicate_at_rail",
    "amount_mismatch",
    "currency_mismatch",
    "destination_mismatch",
    "status_drift",
    "balance_mismatch",
)
_TYPES = ", ".join(f"'{t}'" for t in BREAK_TYPES)

UPGRADE = [
    """
    CREATE TABLE reconciliation_runs (
        id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind         text NOT NULL CHECK (kind IN ('intraday', 'end_of_day', 'recheck',
                         'statement')),
        window_start timestamptz NOT NULL,
        window_end   timestamptz NOT NULL,
        started_at   timestamptz NOT NULL,
        finished_at  timestamptz,
        status       text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
        error        text,
        CHECK (window_start < window_end),
        CHECK ((status = 'running') = (finished_at IS NULL)),
        CHECK (status <> 'failed' OR error IS NOT NULL)
    )
    """,
    # The intraday window starts where the last completed run of its kind ended.
    """CREATE INDEX reconciliation_runs_completed ON reconciliation_runs (kind, window_end)
       WHERE status = 'completed'""",
    """
    CREATE TABLE reconciliation_sources (
        run_id        bigint NOT NULL REFERENCES reconciliation_runs (id),
        source        text NOT NULL CHECK (length(source) BETWEEN 1 AND 64),
        read_at       timestamptz NOT NULL,
        rows_returned bigint NOT NULL CHECK (rows_returned >= 0),
        error         text CHECK (error <> ''),
        PRIMARY KEY (run_id, source)
    )
    """,
    f"""
    CREATE TABLE reconciliation_breaks (
        id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        break_key         text NOT NULL UNIQUE,
        break_type        text NOT NULL CHECK (break_type IN ({_TYPES})),
        settlement_id     uuid,
        rail_object_id    text,
        field             text NOT NULL,
        currency          char(3) CHECK (currency ~ '^[A-Z]{{3}}$'),
        -- JSON values as the report writes them: integer minor units, text, or null.
        expected          jsonb NOT NULL,
        actual            jsonb NOT NULL,
        reason            text NOT NULL,
        status            text NOT NULL DEFAULT 'open'
                          CHECK (status IN ('open', 'healed', 'resolved')),
        first_seen        timestamptz NOT NULL,
        last_seen         timestamptz NOT NULL,
        first_run_id      bigint NOT NULL REFERENCES reconciliation_runs (id),
        last_run_id       bigint NOT NULL REFERENCES reconciliation_runs (id),
        resolved_at       timestamptz,
        resolved_by       text,
        resolution_reason text,
        CHECK (first_seen <= last_seen),
        CHECK ((status = 'open') = (resolved_at IS NULL)),
        CHECK (status <> 'resolved'
               OR (resolved_by IS NOT NULL AND length(trim(resolution_reason)) > 0))
    )
    """,
    """CREATE INDEX reconciliation_breaks_open_by_type ON reconciliation_breaks (break_type, id)
       WHERE status = 'open'""",
    "CREATE INDEX reconciliation_breaks_open ON reconciliation_breaks (id) WHERE status = 'open'",
    """CREATE INDEX reconciliation_breaks_settlement ON reconciliation_breaks (settlement_id)
       WHERE settlement_id IS NOT NULL""",
    # What `upsert_breaks` hands over: one named row per break found.
    """CREATE TYPE break_row AS (break_key text, break_type text, settlement_id uuid,
           rail_object_id text, field text, currency text, expected jsonb, actual jsonb,
           reason text)""",
    """
    CREATE FUNCTION settle_reconciliation_run_final() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' OR OLD.status <> 'running' THEN
            RAISE EXCEPTION 'reconciliation run % is finished; its record is final', OLD.id
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.status = 'completed' AND (
            NOT EXISTS (SELECT 1 FROM reconciliation_sources WHERE run_id = NEW.id)
            OR EXISTS (SELECT 1 FROM reconciliation_sources
                        WHERE run_id = NEW.id AND error IS NOT NULL)) THEN
            RAISE EXCEPTION 'reconciliation run % read no source or a source failed; '
                            'it cannot be completed', NEW.id
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NEW;
    END $$
    """,
    """CREATE TRIGGER reconciliation_runs_final BEFORE UPDATE OR DELETE ON reconciliation_runs
       FOR EACH ROW EXECUTE FUNCTION settle_reconciliation_run_final()""",
    """
    CREATE FUNCTION settle_reconciliation_source_open() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- FOR SHARE: a run being finished waits for this insert, and this one for it.
        IF (SELECT status FROM reconciliation_runs WHERE id = NEW.run_id FOR SHARE)
           IS DISTINCT FROM 'running' THEN
            RAISE EXCEPTION 'reconciliation run % is not running; its evidence is final',
                NEW.run_id USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN NEW;
    END $$
    """,
    """CREATE TRIGGER reconciliation_sources_open BEFORE INSERT ON reconciliation_sources
       FOR EACH ROW EXECUTE FUNCTION settle_reconciliation_source_open()""",
    """CREATE TRIGGER reconciliation_sources_append_only
       BEFORE UPDATE OR DELETE ON reconciliation_sources
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    # Nullable, so the writers that predate them (the inbox's replay) keep working.
    "ALTER TABLE operator_actions ADD COLUMN before jsonb, ADD COLUMN after jsonb",
    """CREATE TRIGGER operator_actions_append_only BEFORE UPDATE OR DELETE ON operator_actions
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
]

DOWNGRADE = [
    "DROP TRIGGER operator_actions_append_only ON operator_actions",
    "ALTER TABLE operator_actions DROP COLUMN before, DROP COLUMN after",
    "DROP TABLE reconciliation_breaks",
    "DROP TYPE break_row",
    "DROP TABLE reconciliation_sources",
    "DROP FUNCTION settle_reconciliation_source_open()",
    "DROP TABLE reconciliation_runs",
    "DROP FUNCTION settle_reconciliation_run_final()",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
