"""Append-only history in monthly partitions, so seven years of retention is detaching a
month and archiving it, never a DELETE over billions of rows.

`settlement_transitions`, `postings` and `operator_actions` become tables partitioned by
range on `occurred_at`, one partition per calendar month in UTC, named `<table>_yYYYYmMM`.
`postings` gains `occurred_at`: its entry's time (the writers pass it; existing rows take
their entry's), defaulting to now() for a writer that does not say.

What changes in integrity, since a unique key of a partitioned table must hold its
partition column:
- `settlement_transitions` is unique on (settlement_id, sequence, occurred_at). One row per
  sequence is kept by the guarded write that inserts it: the settlement's UPDATE compares
  and bumps `version` in the same statement, so a second writer of the same sequence moves
  no row and the batch is refused (its row count is checked).
- `postings` and `operator_actions` are unique on (id, occurred_at); `id` is an identity
  that no writer supplies, so it stays unique.
- No foreign key points at these tables, and every one they hold is kept: transitions to
  settlements, postings to journal_entries and to accounts.
- `journal_entries` stays one table: its (settlement_id, kind) key is what applies a posting
  rule at most once per settlement, and it could not stay exact across months.
- `inbox_events` stays one table: its rows change status (received, applied, parked) long
  after they arrive, and its keys (rail, rail_event_id) and (rail, change_key) are the
  store-before-logic dedupe, which must hold across months, not within one.
Triggers carry over: append-only on all three, and 0009's balanced-entry check per statement.

A write dated in a month without a partition fails (check_violation, "no partition of
relation ... found for row") and its transaction rolls back, so nothing is lost; there is no
DEFAULT partition, since one would forbid DETACH ... CONCURRENTLY and would have to be
scanned to add each month. `settle_ensure_month_partitions(ahead)` creates this month's and
the next `ahead` months' partitions (12 here; the reconciler calls it at start and daily).

Cost on a large database: the three tables are copied into the new layout in one
transaction, holding ACCESS EXCLUSIVE on them (every settlement write waits): plan a window.
Also drops `balance_delta` (0003), which no statement uses. The downgrade copies the rows
back into single tables; months already detached by `settle archive` stay as they are.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

AHEAD = 12
CURRENCY = "char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$')"
TRANSITION_COLUMNS = "settlement_id, sequence, from_status, to_status, reason, actor, occurred_at"
POSTING_COLUMNS = "id, entry_id, account_id, amount, currency"
ACTION_COLUMNS = "id, actor, action, target, detail, occurred_at, before, after"

# Body of each table, in both layouts; `{key}` is where the layouts differ.
BODIES = {
    "settlement_transitions": """
        settlement_id uuid NOT NULL REFERENCES settlements (id),
        sequence      integer NOT NULL CHECK (sequence >= 1),
        from_status   text,
        to_status     text NOT NULL,
        reason        text,
        actor         text NOT NULL,
        occurred_at   timestamptz NOT NULL,
        PRIMARY KEY ({key}),
        CHECK ((sequence = 1) = (from_status IS NULL))""",
    "postings": f"""
        id         bigint GENERATED ALWAYS AS IDENTITY,
        entry_id   uuid NOT NULL REFERENCES journal_entries (id),
        account_id text NOT NULL,
        amount     bigint NOT NULL CHECK (amount <> 0),
        currency   {CURRENCY},{{occurred_at}}
        PRIMARY KEY ({{key}}),
        FOREIGN KEY (account_id, currency) REFERENCES accounts (id, currency)""",
    "operator_actions": """
        id          bigint GENERATED ALWAYS AS IDENTITY,
        actor       text NOT NULL,
        action      text NOT NULL,
        target      text NOT NULL,
        detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
        occurred_at timestamptz NOT NULL DEFAULT now(),
        before      jsonb,
        after       jsonb,
        PRIMARY KEY ({key})""",
}
KEYS = {
    "settlement_transitions": ("settlement_id, sequence", "settlement_id, sequence, occurred_at"),
    "postings": ("id", "id, occurred_at"),
    "operator_actions": ("id", "id, occurred_at"),
}
INDEXES = {
    "postings": {"postings_entry": "(entry_id)", "postings_account": "(account_id, id)"},
}
TRIGGERS = [
    """CREATE TRIGGER transitions_append_only BEFORE UPDATE OR DELETE ON settlement_transitions
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    """CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    """CREATE TRIGGER postings_balance_per_statement AFTER INSERT ON postings
       REFERENCING NEW TABLE AS new_postings
       FOR EACH STATEMENT EXECUTE FUNCTION settle_statement_entries_balanced()""",
    """CREATE TRIGGER operator_actions_append_only BEFORE UPDATE OR DELETE ON operator_actions
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
]
# Each month's partition is made as a plain table and then attached: ATTACH takes SHARE
# UPDATE EXCLUSIVE on the parent, so writes go on, where CREATE ... PARTITION OF would block
# them. A name taken by a detached (archived) month fails loudly rather than reuse it.
MONTH_PARTITION = """
CREATE FUNCTION settle_month_partition(parent text, month timestamp) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    part text := format('%s_y%sm%s', parent, to_char(month, 'YYYY'), to_char(month, 'MM'));
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
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, part, month AT TIME ZONE 'UTC',
                   (month + interval '1 month') AT TIME ZONE 'UTC');
    RETURN true;
END $$
"""
ENSURE_MONTHS = """
CREATE FUNCTION settle_ensure_month_partitions(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    this_month timestamp := date_trunc('month', now() AT TIME ZONE 'UTC');
    created integer := 0;
    parent text;
BEGIN
    IF ahead IS NULL OR ahead < 0 THEN
        RAISE EXCEPTION 'months ahead must be 0 or more, not %', ahead
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Callers at once (replicas starting together) take turns instead of racing on names.
    PERFORM pg_advisory_xact_lock(hashtext('settle_ensure_month_partitions'));
    FOREACH parent IN ARRAY ARRAY['settlement_transitions', 'postings', 'operator_actions'] LOOP
        FOR step IN 0..ahead LOOP
            IF settle_month_partition(parent, this_month + make_interval(months => step)) THEN
                created := created + 1;
            END IF;
        END LOOP;
    END LOOP;
    RETURN created;
END $$
"""


def _months_of(table: str) -> str:
    """Create the partitions of every month `table`'s old rows fall in."""
    return f"""SELECT settle_month_partition('{table}', m) FROM generate_series(
                 (SELECT date_trunc('month', min(occurred_at) AT TIME ZONE 'UTC') FROM {table}_old),
                 (SELECT date_trunc('month', max(occurred_at) AT TIME ZONE 'UTC') FROM {table}_old),
                 interval '1 month') AS m"""


def _set_identity(table: str) -> str:
    return f"""SELECT setval(pg_get_serial_sequence('{table}', 'id'),
                             coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"""


def _set_aside(table: str) -> list[str]:
    """Rename `table` out of the way, with its key and identity, and drop its other indexes
    (the copy reads it whole and it is dropped after)."""
    statements = [
        f"ALTER TABLE {table} RENAME TO {table}_old",
        f"ALTER INDEX {table}_pkey RENAME TO {table}_old_pkey",
    ]
    statements += [f"DROP INDEX {name}" for name in INDEXES.get(table, {})]
    # Its checks and foreign keys too, so the new table's take the same names.
    statements.append(
        f"""DO $$ DECLARE c record; BEGIN
              FOR c IN SELECT conname FROM pg_constraint
                        WHERE conrelid = '{table}_old'::regclass AND contype IN ('c', 'f') LOOP
                  EXECUTE format('ALTER TABLE {table}_old RENAME CONSTRAINT %I TO %I',
                                 c.conname, c.conname || '_old');
              END LOOP;
            END $$"""
    )
    if table != "settlement_transitions":
        statements.append(f"ALTER SEQUENCE {table}_id_seq RENAME TO {table}_old_id_seq")
    return statements


def _create(table: str, partitioned: bool) -> list[str]:
    key = KEYS[table][partitioned]
    occurred_at = "\n        occurred_at timestamptz NOT NULL DEFAULT now()," if partitioned else ""
    body = BODIES[table].replace("{key}", key).replace("{occurred_at}", occurred_at)
    by_month = " PARTITION BY RANGE (occurred_at)" if partitioned else ""
    statements = [f"CREATE TABLE {table} ({body}\n){by_month}"]
    statements += [f"CREATE INDEX {n} ON {table} {c}" for n, c in INDEXES.get(table, {}).items()]
    return statements


def upgrade() -> None:
    op.execute("DROP TYPE balance_delta")
    for table in BODIES:
        for statement in _set_aside(table):
            op.execute(statement)
    op.execute(MONTH_PARTITION)
    op.execute(ENSURE_MONTHS)
    for table in BODIES:
        for statement in _create(table, partitioned=True):
            op.execute(statement)
    op.execute(_months_of("settlement_transitions"))
    op.execute(_months_of("operator_actions"))
    # A posting's month is its entry's.
    op.execute(_months_of("postings").replace("FROM postings_old", "FROM journal_entries"))
    op.execute(f"SELECT settle_ensure_month_partitions({AHEAD})")
    # And last month: on a fresh database, a write stamped by a clock a little behind just
    # after the month turned (or seeded a little into the past) still has a partition.
    for table in BODIES:
        op.execute(
            f"""SELECT settle_month_partition('{table}',
                   date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 month')"""
        )
    op.execute(
        f"""INSERT INTO settlement_transitions ({TRANSITION_COLUMNS})
            SELECT {TRANSITION_COLUMNS} FROM settlement_transitions_old"""
    )
    op.execute(
        f"""INSERT INTO operator_actions ({ACTION_COLUMNS}) OVERRIDING SYSTEM VALUE
            SELECT {ACTION_COLUMNS} FROM operator_actions_old"""
    )
    # The triggers come after the copy: every copied entry balanced when it was committed.
    op.execute(
        f"""INSERT INTO postings ({POSTING_COLUMNS}, occurred_at) OVERRIDING SYSTEM VALUE
            SELECT p.{POSTING_COLUMNS.replace(", ", ", p.")}, w.occurred_at
              FROM postings_old p JOIN journal_entries w ON w.id = p.entry_id"""
    )
    for table in BODIES:
        op.execute(f"DROP TABLE {table}_old")
    for table in ("postings", "operator_actions"):
        op.execute(_set_identity(table))
    for statement in TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    for table in BODIES:
        for statement in _set_aside(table):
            op.execute(statement)
        for statement in _create(table, partitioned=False):
            op.execute(statement)
    op.execute(
        f"""INSERT INTO settlement_transitions ({TRANSITION_COLUMNS})
            SELECT {TRANSITION_COLUMNS} FROM settlement_transitions_old"""
    )
    op.execute(
        f"""INSERT INTO operator_actions ({ACTION_COLUMNS}) OVERRIDING SYSTEM VALUE
            SELECT {ACTION_COLUMNS} FROM operator_actions_old"""
    )
    op.execute(
        f"""INSERT INTO postings ({POSTING_COLUMNS}) OVERRIDING SYSTEM VALUE
            SELECT {POSTING_COLUMNS} FROM postings_old"""
    )
    for table in BODIES:
        op.execute(f"DROP TABLE {table}_old")
    for table in ("postings", "operator_actions"):
        op.execute(_set_identity(table))
    for statement in TRIGGERS:
        op.execute(statement)
    op.execute("DROP FUNCTION settle_ensure_month_partitions(integer)")
    op.execute("DROP FUNCTION settle_month_partition(text, timestamp)")
    op.execute("CREATE TYPE balance_delta AS (account_id text, delta bigint)")
