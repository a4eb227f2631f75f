"""Row types of the guarded settlement write: one composite type per table it writes.

`services/settlement/transitions.py` hands each table its rows as one array of these types, so
the statement reads them by column name (`unnest($2::settlement_move[]) AS m` then `m.id`,
`m.from_status`, ...) instead of matching some thirty positional arrays by hand. Each type
names exactly what the write supplies; the statement fills in the rest (time, topic, ids).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TYPES = {
    # The guarded update of one settlement: from where it was locked to where it ends.
    "settlement_move": """id uuid, from_status text, from_version integer, status text,
                          version integer, reason text, rail_reference text""",
    "transition_row": """settlement_id uuid, sequence integer, from_status text,
                         to_status text, reason text, actor text""",
    "entry_row": "id uuid, tenant text, settlement_id uuid, kind text",
    "posting_row": "entry_id uuid, account_id text, amount bigint, currency text",
    "balance_delta": "account_id text, delta bigint",
    "event_row": "event_id uuid, settlement_id uuid, sequence integer, payload bytea",
}


def upgrade() -> None:
    for name, attributes in TYPES.items():
        op.execute(f"CREATE TYPE {name} AS ({attributes})")


def downgrade() -> None:
    for name in reversed(TYPES):
        op.execute(f"DROP TYPE {name}")
