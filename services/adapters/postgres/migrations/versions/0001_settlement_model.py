"""The settlement data model: settlements and their audit trail, idempotency records,
accounts with sharded balances, journal entries and postings, outbox, rail instructions,
inbox events and operator actions.

Money is BIGINT minor units beside a three-letter currency code. What the database can
enforce, it enforces: positive amounts, one idempotency key and one reference per tenant,
one row per rail event, balanced journal entries (checked at commit), append-only postings
and transitions.

Revision ID: 0001
Revises:
Create Date: 2026-11-25
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CURRENCY = "char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$')"

UPGRADE = [
    f"""
    CREATE TABLE settlements (
        id              uuid PRIMARY KEY,
        tenant          text NOT NULL CHECK (length(tenant) BETWEEN 1 AND 64),
        reference       text NOT NULL CHECK (length(reference) BETWEEN 1 AND 255),
        idempotency_key text NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
        payee           text NOT NULL CHECK (length(payee) BETWEEN 1 AND 255),
        destination     text NOT NULL CHECK (length(destination) BETWEEN 1 AND 255),
        amount          bigint NOT NULL CHECK (amount > 0),
        currency        {CURRENCY},
        rail            text NOT NULL,
        metadata        jsonb NOT NULL DEFAULT '{{}}'::jsonb
                        CHECK (jsonb_typeof(metadata) = 'object'),
        status          text NOT NULL CHECK (status IN ('accepted', 'dispatching', 'submitted',
                            'paid', 'failed', 'reversed', 'needs_review')),
        -- Number of transitions so far; every guarded update compares and bumps it, and it
        -- is the sequence of the latest event on settlement.events.
        version         integer NOT NULL DEFAULT 1 CHECK (version >= 1),
        reason          text,
        rail_reference  text,
        created_at      timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL,
        CONSTRAINT settlements_reference_unique UNIQUE (tenant, reference),
        CONSTRAINT settlements_needs_review_reason
            CHECK (status <> 'needs_review' OR reason IS NOT NULL)
    )
    """,
    "CREATE INDEX settlements_tenant_status ON settlements (tenant, status, id)",
    """CREATE INDEX settlements_rail_reference ON settlements (rail_reference)
       WHERE rail_reference IS NOT NULL""",
    """
    CREATE TABLE settlement_transitions (
        settlement_id uuid NOT NULL REFERENCES settlements (id),
        sequence      integer NOT NULL CHECK (sequence >= 1),
        from_status   text,
        to_status     text NOT NULL,
        reason        text,
        actor         text NOT NULL,
        occurred_at   timestamptz NOT NULL,
        PRIMARY KEY (settlement_id, sequence),
        CHECK ((sequence = 1) = (from_status IS NULL))
    )
    """,
    """
    CREATE TABLE idempotency_keys (
        tenant           text NOT NULL,
        key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
        fingerprint      bytea NOT NULL CHECK (length(fingerprint) = 32),
        method           text NOT NULL,
        path             text NOT NULL,
        state            text NOT NULL CHECK (state IN ('in_flight', 'completed')),
        -- The in-flight holder's lease and fence: a request that outlives its lease loses
        -- the key to the next one and its late write is rejected by the fence.
        fence            bigint NOT NULL DEFAULT 1 CHECK (fence >= 1),
        locked_until     timestamptz,
        settlement_id    uuid,
        response_status  smallint,
        response_body    bytea,
        response_headers jsonb,
        created_at       timestamptz NOT NULL,
        completed_at     timestamptz,
        PRIMARY KEY (tenant, key),
        CHECK ((state = 'completed')
               = (response_status IS NOT NULL AND response_body IS NOT NULL)),
        CHECK (state <> 'in_flight' OR locked_until IS NOT NULL)
    )
    """,
    "CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at)",
    f"""
    CREATE TABLE accounts (
        id          text PRIMARY KEY,
        tenant      text NOT NULL,
        kind        text NOT NULL,
        currency    {CURRENCY},
        created_at  timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT accounts_kind_unique UNIQUE (tenant, kind, currency),
        CONSTRAINT accounts_id_currency UNIQUE (id, currency)
    )
    """,
    # A hot account's balance is spread over shards summed on read, so concurrent
    # settlements of one tenant do not all queue on one row lock.
    """
    CREATE TABLE account_balances (
        account_id text NOT NULL REFERENCES accounts (id),
        shard      smallint NOT NULL CHECK (shard >= 0),
        balance    bigint NOT NULL DEFAULT 0,
        PRIMARY KEY (account_id, shard)
    )
    """,
    """
    CREATE TABLE journal_entries (
        id            uuid PRIMARY KEY,
        tenant        text NOT NULL,
        settlement_id uuid REFERENCES settlements (id),
        kind          text NOT NULL,
        occurred_at   timestamptz NOT NULL,
        -- A posting rule applies at most once per settlement, whatever redelivers it.
        CONSTRAINT journal_entries_once UNIQUE (settlement_id, kind)
    )
    """,
    f"""
    CREATE TABLE postings (
        id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        entry_id   uuid NOT NULL REFERENCES journal_entries (id),
        account_id text NOT NULL,
        -- Signed minor units: debits positive, credits negative.
        amount     bigint NOT NULL CHECK (amount <> 0),
        currency   {CURRENCY},
        FOREIGN KEY (account_id, currency) REFERENCES accounts (id, currency)
    )
    """,
    "CREATE INDEX postings_entry ON postings (entry_id)",
    "CREATE INDEX postings_account ON postings (account_id, id)",
    """
    CREATE FUNCTION settle_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM postings WHERE entry_id = NEW.entry_id
                   GROUP BY currency HAVING sum(amount) <> 0) THEN
            RAISE EXCEPTION 'journal entry % does not balance', NEW.entry_id
                USING ERRCODE = 'check_violation';
        END IF;
        RETURN NULL;
    END $$
    """,
    """
    CREATE CONSTRAINT TRIGGER postings_balance AFTER INSERT ON postings
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION settle_entry_balanced()
    """,
    """
    CREATE FUNCTION settle_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION '% is append-only', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END $$
    """,
    """CREATE TRIGGER postings_append_only BEFORE UPDATE OR DELETE ON postings
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    """CREATE TRIGGER transitions_append_only BEFORE UPDATE OR DELETE ON settlement_transitions
       FOR EACH ROW EXECUTE FUNCTION settle_append_only()""",
    """
    CREATE TABLE outbox (
        id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        event_id      uuid NOT NULL UNIQUE,
        settlement_id uuid NOT NULL,
        sequence      integer NOT NULL CHECK (sequence >= 1),
        topic         text NOT NULL,
        message_key   bytea NOT NULL,
        payload       bytea NOT NULL,
        headers       jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at    timestamptz NOT NULL DEFAULT now(),
        claimed_by    text,
        claim_until   timestamptz,
        published_at  timestamptz,
        CONSTRAINT outbox_sequence_unique UNIQUE (settlement_id, sequence)
    )
    """,
    "CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL",
    "CREATE INDEX outbox_published_at ON outbox (published_at) WHERE published_at IS NOT NULL",
    f"""
    CREATE TABLE rail_instructions (
        settlement_id   uuid PRIMARY KEY REFERENCES settlements (id),
        tenant          text NOT NULL,
        rail            text NOT NULL,
        method          text NOT NULL CHECK (method IN ('transfer', 'payout')),
        -- SHA-256 over the settlement's identity and content: derivable again from a backup.
        idempotency_key text NOT NULL UNIQUE CHECK (idempotency_key ~ '^[0-9a-f]{{64}}$'),
        destination     text NOT NULL,
        amount          bigint NOT NULL CHECK (amount > 0),
        currency        {CURRENCY},
        status          text NOT NULL CHECK (status IN ('pending', 'processing',
                            'transferred', 'failed', 'needs_review')),
        fence           bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
        lease_until     timestamptz,
        claimed_by      text,
        attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at timestamptz,
        first_sent_at   timestamptz,
        last_error      text,
        error_class     text CHECK (error_class IN ('refused', 'retryable', 'ambiguous')),
        rail_reference  text,
        created_at      timestamptz NOT NULL,
        updated_at      timestamptz NOT NULL,
        CHECK (status <> 'processing' OR lease_until IS NOT NULL),
        CHECK (status <> 'transferred' OR rail_reference IS NOT NULL)
    )
    """,
    """CREATE INDEX rail_instructions_due ON rail_instructions (status, next_attempt_at)
       WHERE status IN ('pending', 'processing')""",
    """CREATE INDEX rail_instructions_rail_reference ON rail_instructions (rail_reference)
       WHERE rail_reference IS NOT NULL""",
    """
    CREATE TABLE inbox_events (
        id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        rail            text NOT NULL,
        rail_event_id   text,
        event_type      text,
        object_id       text,
        -- Object id and event type: two event ids describing one change collide here.
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
        CHECK (status = 'rejected' OR rail_event_id IS NOT NULL),
        CHECK (status NOT IN ('parked', 'dead', 'rejected') OR reason IS NOT NULL)
    )
    """,
    "CREATE UNIQUE INDEX inbox_events_rail_event ON inbox_events (rail, rail_event_id)",
    "CREATE UNIQUE INDEX inbox_events_change ON inbox_events (rail, change_key)",
    """CREATE INDEX inbox_events_pending ON inbox_events (status, next_attempt_at)
       WHERE status IN ('received', 'parked')""",
    """
    CREATE TABLE operator_actions (
        id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        actor       text NOT NULL,
        action      text NOT NULL,
        target      text NOT NULL,
        detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
        occurred_at timestamptz NOT NULL DEFAULT now()
    )
    """,
]

DOWNGRADE = [
    "DROP TABLE operator_actions",
    "DROP TABLE inbox_events",
    "DROP TABLE rail_instructions",
    "DROP TABLE outbox",
    "DROP TABLE postings",
    "DROP FUNCTION settle_entry_balanced()",
    "DROP TABLE journal_entries",
    "DROP TABLE account_balances",
    "DROP TABLE accounts",
    "DROP TABLE idempotency_keys",
    "DROP TABLE settlement_transitions",
    "DROP FUNCTION settle_append_only()",
    "DROP TABLE settlements",
]


def upgrade() -> None:
    for statement in UPGRADE:
        op.execute(statement)


def downgrade() -> None:
    for statement in DOWNGRADE:
        op.execute(statement)
