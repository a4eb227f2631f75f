"""The inbox in monthly partitions too, so its seven years are detached a month at a time.

`inbox_events` becomes a table partitioned by range on a new column, `received_month`: the
first instant (UTC) of the calendar month of `received_at`, held to it by a CHECK. Partitions
are named `inbox_events_yYYYYmMM` and made by 0010's functions, which now also keep the inbox's
months (this month and 12 ahead) and give its partitions 0008's fill factor of 50 (a
partitioned table holds no storage options itself).

Why a month column rather than `received_at` as the key: a unique key of a partitioned table
must hold its partition key, and (rail, rail_event_id, received_at) would dedupe nothing,
since a redelivery arrives at another instant. (rail, rail_event_id, received_month) and
(rail, change_key, received_month) keep the dedupe of redeliveries and of twin events a
constraint within a month, so `ON CONFLICT DO NOTHING` still decides it between writers at
once. Across months the intake's INSERT decides it in the same statement: it skips an event
whose id or change is stored in any month since the rail's redelivery horizon
(`intake.REDELIVERY_HORIZON`). The primary key is (id, received_month); `id` is an identity no
writer supplies, so it stays unique.

Rows never change month: `received_at` is written once, so updates of status (received ->
applied | parked -> dead, a replay) stay in their partition. No foreign key points at the
inbox and it holds none; no trigger is on it.

Cost on a large database: the table is copied into the new layout in one transaction,
holding ACCESS EXCLUSIVE on it (every webhook waits; the rail retries): plan a window. The
downgrade copies the rows back into one table; months already detached by `settle archive`
stay as they are. Going back fails loudly (unique violation) if two months hold the same
event or change, which only a redelivery racing its original across a month's turn can store.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

import importlib
from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD = 12
FILL_FACTOR = 50
COLUMNS = (
    "id, rail, rail_event_id, event_type, object_id, change_key, settlement_id, payload, "
    "status, attempts, next_attempt_at, reason, received_at, applied_at, amount_reversed"
)
MONTH_OF_RECEIPT = "date_trunc('month', received_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'"
BODY = """
    id              bigint GENERATED ALWAYS AS IDENTITY,
    rail            text NOT NULL,
    rail_event_id   text,
    event_type      text,
    object_id       text,
    change_key      text,
    settlement_id   uuid,
    payload         bytea NOT NULL,
    status          text NOT NULL CHECK (status IN ('received', 'applied', 'ignored',
                        'parked', 'dead', 'rejected')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz,
    reason          text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    applied_at      timestamptz,
    amount_reversed bigint CHECK (amount_reversed > 0),{month}
    PRIMARY KEY ({key}),
    CHECK (status = 'rejected' OR rail_event_id IS NOT NULL),
    CHECK (status NOT IN ('parked', 'dead', 'rejected') OR reason IS NOT NULL)"""
MONTH_COLUMN = f"""
    received_month  timestamptz NOT NULL
                    DEFAULT (date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
                    CONSTRAINT inbox_events_received_month
                    CHECK (received_month = {MONTH_OF_RECEIPT}),"""
INDEXES = {
    "inbox_events_rail_event": "UNIQUE INDEX {name} ON inbox_events (rail, rail_event_id{month})",
    "inbox_events_change": "UNIQUE INDEX {name} ON inbox_events (rail, change_key{month})",
    "inbox_events_pending": """INDEX {name} ON inbox_events (status, next_attempt_at)
                               WHERE status IN ('received', 'parked')""",
    "inbox_events_settlement": """INDEX {name} ON inbox_events (settlement_id)
                                  WHERE settlement_id IS NOT NULL""",
    "inbox_events_object": "INDEX {name} ON inbox_events (object_id) WHERE object_id IS NOT NULL",
}
# 0010's, with the fill factor of the tables updated in place (0008): set on each partition
# before it is attached, since the partitioned table cannot hold it.
MONTH_PARTITION = f"""
CREATE OR REPLACE FUNCTION settle_month_partition(parent text, month timestamp) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    part text := format('%s_y%sm%s', parent, to_char(month, 'YYYY'), to_char(month, 'MM'));
    fill integer := CASE parent WHEN 'inbox_events' THEN {FILL_FACTOR} END;
BEGIN
    IF month <> date_trunc('month', month) THEN
        RAISE EXCEPTION 'a month partition starts on the 1st, not at %', month
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                WHERE i.inhparent = parent::regclass AND c.relname = part) THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                   part, parent);
    IF fill IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I SET (fillfactor = %s)', part, fill);
    END IF;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, part, month AT TIME ZONE 'UTC',
                   (month + interval '1 month') AT TIME ZONE 'UTC');
    RETURN true;
END $$
"""
THIS_MONTH = "date_trunc('month', now() AT TIME ZONE 'UTC')"
PARTITIONED = "ARRAY['settlement_transitions', 'postings', 'operator_actions']"


def _history_0010() -> tuple[str, str]:
    """0010's two functions, as the downgrade puts them back."""
    base = importlib.import_module(
        "services.adapters.postgres.migrations.versions.0010_monthly_history"
    )
    replace = ("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    return str(base.MONTH_PARTITION).replace(*replace), str(base.ENSURE_MONTHS).replace(*replace)


def _ensure_months() -> str:
    """0010's `settle_ensure_month_partitions`, keeping the inbox's months as well."""
    ensure = _history_0010()[1]
    assert PARTITIONED in ensure
    return ensure.replace(PARTITIONED, PARTITIONED.replace("]", ", 'inbox_events']"))


def _set_aside() -> list[str]:
    """Rename the inbox out of the way, with its key, checks and identity (so the new table's
    take the same names), and drop its other indexes (the copy reads it whole)."""
    statements = [
        "ALTER TABLE inbox_events RENAME TO inbox_events_old",
        "ALTER INDEX inbox_events_pkey RENAME TO inbox_events_old_pkey",
        "ALTER SEQUENCE inbox_events_id_seq RENAME TO inbox_events_old_id_seq",
    ]
    statements += [f"DROP INDEX {name}" for name in INDEXES]
    statements.append(
        """DO $$ DECLARE c record; BEGIN
              FOR c IN SELECT conname FROM pg_constraint
                        WHERE conrelid = 'inbox_events_old'::regclass AND contype = 'c' LOOP
                  EXECUTE format('ALTER TABLE inbox_events_old RENAME CONSTRAINT %I TO %I',
                                 c.conname, c.conname || '_old');
              END LOOP;
            END $$"""
    )
    return statements


def _create(partitioned: bool) -> list[str]:
    month = ", received_month" if partitioned else ""
    body = BODY.format(month=MONTH_COLUMN if partitioned else "", key=f"id{month}")
    layout = " PARTITION BY RANGE (received_month)" if partitioned else ""
    room = "" if partitioned else f" WITH (fillfactor = {FILL_FACTOR})"
    statements = [f"CREATE TABLE inbox_events ({body}\n){layout}{room}"]
    statements += [f"CREATE {i.format(name=n, month=month)}" for n, i in INDEXES.items()]
    return statements


def _copy(month: str) -> str:
    return f"""INSERT INTO inbox_events ({COLUMNS}{month}) OVERRIDING SYSTEM VALUE
               SELECT {COLUMNS}{month and f", {MONTH_OF_RECEIPT}"} FROM inbox_events_old"""


def _finish() -> list[str]:
    return [
        "DROP TABLE inbox_events_old",
        """SELECT setval(pg_get_serial_sequence('inbox_events', 'id'),
                         coalesce((SELECT max(id) FROM inbox_events), 0) + 1, false)""",
    ]


def upgrade() -> None:
    for statement in _set_aside():
        op.execute(statement)
    op.execute(MONTH_PARTITION)
    op.execute(_ensure_months())
    for statement in _create(partitioned=True):
        op.execute(statement)
    # Every month from the oldest row's (or last month's: a clock a little behind at the turn
    # of a month) to the newest row's (or AHEAD months from now).
    op.execute(
        f"""SELECT settle_month_partition('inbox_events', m) FROM generate_series(
              least((SELECT date_trunc('month', min(received_at) AT TIME ZONE 'UTC')
                       FROM inbox_events_old), {THIS_MONTH} - interval '1 month'),
              greatest((SELECT date_trunc('month', max(received_at) AT TIME ZONE 'UTC')
                          FROM inbox_events_old), {THIS_MONTH} + interval '{AHEAD} months'),
              interval '1 month') AS m"""
    )
    op.execute(_copy(", received_month"))
    for statement in _finish():
        op.execute(statement)


def downgrade() -> None:
    for statement in _set_aside():
        op.execute(statement)
    for statement in _create(partitioned=False):
        op.execute(statement)
    op.execute(_copy(""))
    for statement in _finish():
        op.execute(statement)
    for function in _history_0010():
        op.execute(function)
