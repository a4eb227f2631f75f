"""Each service its own database role, granted only the rows its statements read and write;
and a rail instruction's amount, currency and destination fixed once the row is written.

Five roles, one per service: `settle_ledger`, `settle_relay`, `settle_inbox`,
`settle_reconciler` and `settle_console`. They are NOLOGIN and own nothing: the deploy gives
each a login and a password (`ALTER ROLE settle_ledger LOGIN PASSWORD '...'`), and points
that service's database URL at it. Roles belong to the whole cluster, so each is created
only where it does not exist yet (a cluster holds several settle databases, tests many),
which needs CREATEROLE of the migrating owner unless an administrator made the roles first;
the grants are this database's own.

What each may do follows from its SQL:

- `settle_ledger` books: it claims idempotency keys (and sweeps them), inserts settlements,
  their first transition, entries, postings, balances, the rail instruction and the event.
- `settle_relay` claims and records rail instructions (their status, lease and fence, never
  their money), publishes and prunes the outbox, builds and uploads the SEPA rail's files,
  and moves settlements through the guarded write.
- `settle_inbox` stores and applies the rail's webhooks and the bank's reports through the
  guarded write, and replays an event for an operator (proposed in two-person mode).
- `settle_reconciler` records runs, their evidence and breaks, heals a drift through the
  inbox's own statements, books the rail's charges, and does the operators' actions its
  HTTP endpoints and the operators' commands ask for (resolutions, corrections, write-offs).
- `settle_console` reads, keeps its sign-in sessions, proposes, decides proposals, assigns,
  comments and reopens breaks, and sends an event back to the inbox; it writes no money: an
  approved action that moves money is refused to it, and done where the operators' commands
  run (as `settle_reconciler`).

UPDATE is granted per column. Reading a row to update it (`FOR UPDATE`) needs the UPDATE
of some column of it; each such read is of a table the role updates. The history's months
are kept by the reconciler through `settle_ensure_month_partitions`, which now runs with its
owner's rights (the partitions are the owner's tables), as deploy/postgres/service_role.sql
makes it for the role of a single-role deployment.

`rail_instructions` gains a trigger refusing an UPDATE that changes `amount`, `currency` or
`destination` after the row is written, whoever asks, the tables' owner included: what the
rail is told to pay is what was booked. The columns the relay's claims touch are never these,
so the check is one comparison per updated row.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-09
"""

from collections.abc import Mapping, Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

Grants = Mapping[str, str]  # table -> privileges, as GRANT spells them

# The guarded write (services/settlement/transitions.py) with the ledger's own booking:
# entries, postings (and the per-statement balance check's notes), accounts, balances.
BOOKS: Grants = {
    "settlement_transitions": "INSERT",
    "journal_entries": "SELECT, INSERT",
    "postings": "SELECT, INSERT",
    "entries_to_balance": "SELECT, INSERT, DELETE",
    "accounts": "INSERT",
    "account_balances": "SELECT, INSERT, UPDATE (balance)",
    "outbox": "INSERT",
}
GUARDED: Grants = {
    **BOOKS,
    "settlements": "SELECT, UPDATE (status, version, reason, amount_reversed, rail_reference, "
    "updated_at)",
}
# The inbox's store and apply: the reconciler heals through the very same statements.
INBOX_EVENTS = (
    "SELECT, INSERT, UPDATE (status, attempts, reason, settlement_id, applied_at, "
    "next_attempt_at, mismatch, change_key)"
)
# An operator's proposal, decided once; the audit rows the actions add.
PROPOSALS: Grants = {
    "operator_proposals": "SELECT, INSERT, UPDATE (status, decided_by, decided_at, outcome)",
    "operator_actions": "SELECT, INSERT",
}
# The written history read back: a settlement's story (lineage, the operators' endpoints).
HISTORY: Grants = {"settlement_transitions": "SELECT, INSERT", "outbox": "SELECT, INSERT"}

ROLES: Mapping[str, Grants] = {
    "settle_ledger": {
        **BOOKS,
        "settlement_transitions": "SELECT, INSERT",
        "accounts": "SELECT, INSERT",
        "idempotency_keys": "SELECT, INSERT, DELETE, UPDATE (fingerprint, state, fence, "
        "locked_until, settlement_id, response_status, response_body, response_headers, "
        "created_at, completed_at)",
        "settlements": "SELECT, INSERT",
        "rail_instructions": "SELECT, INSERT",
    },
    "settle_relay": {
        **GUARDED,
        "outbox": "SELECT, INSERT, DELETE, UPDATE (published_at)",
        "rail_instructions": "SELECT, UPDATE (status, fence, lease_until, claimed_by, attempts, "
        "first_sent_at, next_attempt_at, last_error, error_class, rail_reference, bank_file, "
        "updated_at)",
        "bank_files": "SELECT, INSERT, UPDATE (status, fence, lease_until, claimed_by, attempts, "
        "next_attempt_at, last_error, bank_file_id, uploaded_at, updated_at)",
    },
    "settle_inbox": {
        **GUARDED,
        **PROPOSALS,
        "operator_actions": "INSERT",  # a replay's audit row, never read back here
        "inbox_events": INBOX_EVENTS,
        "rail_instructions": "SELECT",
        "bank_files": "SELECT",
        "bank_cursors": "SELECT, INSERT, UPDATE (position, updated_at)",
        "bank_reports": "SELECT, INSERT, UPDATE (status, reason, applied_at)",
    },
    "settle_reconciler": {
        **GUARDED,
        **PROPOSALS,
        **HISTORY,
        "inbox_events": INBOX_EVENTS,
        "rail_instructions": "SELECT, UPDATE (status, rail_reference, attempts, lease_until, "
        "next_attempt_at, updated_at)",
        "rail_charges": "SELECT, INSERT",
        "bank_files": "SELECT",
        "reconciliation_runs": "SELECT, INSERT, UPDATE (finished_at, status, error)",
        "reconciliation_sources": "SELECT, INSERT",
        "reconciliation_balances": "SELECT, INSERT",
        "reconciliation_rail_staging": "SELECT, INSERT, DELETE, UPDATE (amount_reversed, status)",
        "reconciliation_breaks": "SELECT, INSERT, UPDATE (last_seen, last_run_id, expected, "
        "actual, reason, status, resolved_at, resolved_by, resolution_reason, assignee, "
        "resolution_kind)",
        "reconciliation_break_comments": "SELECT, INSERT",
    },
    "settle_console": {
        **PROPOSALS,
        "console_sessions": "SELECT, INSERT, DELETE, UPDATE (last_seen_at)",
        "inbox_events": "SELECT, UPDATE (status, attempts, next_attempt_at, reason)",
        "reconciliation_breaks": "SELECT, UPDATE (assignee, status, resolved_at, resolved_by, "
        "resolution_reason, resolution_kind)",
        "reconciliation_break_comments": "SELECT, INSERT",
        **dict.fromkeys(
            (
                "settlements",
                "settlement_transitions",
                "journal_entries",
                "postings",
                "outbox",
                "rail_instructions",
                "reconciliation_runs",
            ),
            "SELECT",
        ),
    },
}
# The reconciler keeps the history's months ahead (any role may: it only adds months).
MONTHS = "settle_ensure_month_partitions(integer)"


def _create_role(role: str) -> str:
    # Looked for first: a role an administrator made already needs no CREATEROLE of the
    # migrating owner. Two databases migrated at once may both find it missing: the later
    # CREATE then fails on the catalog's unique index rather than finding it there.
    return f"""
    DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
            CREATE ROLE {role} NOLOGIN;
        END IF;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END $$"""


FIXED = """
CREATE FUNCTION settle_instruction_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rail instruction %: amount, currency and destination are fixed once '
                    'written', OLD.settlement_id
        USING ERRCODE = 'restrict_violation';
END $$
"""
FIXED_TRIGGER = """
CREATE TRIGGER rail_instructions_fixed
    BEFORE UPDATE ON rail_instructions FOR EACH ROW
    WHEN ((NEW.amount, NEW.currency, NEW.destination)
          IS DISTINCT FROM (OLD.amount, OLD.currency, OLD.destination))
    EXECUTE FUNCTION settle_instruction_fixed()
"""
# The function's owner creates the months; its search path is this schema's alone.
MONTHS_AS_OWNER = f"""
DO $$ BEGIN
    EXECUTE format('ALTER FUNCTION {MONTHS} SECURITY DEFINER SET search_path = %I, pg_temp',
                   current_schema());
END $$"""


def _in_schema(statement: str) -> str:
    # `statement` with %I naming the schema the migration runs in.
    return f"DO $$ BEGIN EXECUTE format('{statement}', current_schema()); END $$"


def upgrade() -> None:
    for role, grants in ROLES.items():
        op.execute(_create_role(role))
        op.execute(_in_schema(f"GRANT USAGE ON SCHEMA %I TO {role}"))
        for table, privileges in grants.items():
            op.execute(f"GRANT {privileges} ON {table} TO {role}")
    op.execute(MONTHS_AS_OWNER)
    op.execute(FIXED)
    op.execute(FIXED_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER rail_instructions_fixed ON rail_instructions")
    op.execute("DROP FUNCTION settle_instruction_fixed()")
    op.execute(f"ALTER FUNCTION {MONTHS} SECURITY INVOKER RESET search_path")
    # The roles stay: other databases of the cluster may hold grants to them.
    for role in ROLES:
        op.execute(_in_schema(f"REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM {role}"))
        op.execute(_in_schema(f"REVOKE USAGE ON SCHEMA %I FROM {role}"))
