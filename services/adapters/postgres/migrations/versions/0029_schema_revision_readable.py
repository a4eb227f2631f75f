"""Each service reads the schema's revision when it starts: `alembic_version` readable by the
service roles.

A service refuses to start against a schema older than the code needs (and names both
revisions: services/adapters/postgres/schema_version.py); it reads `alembic_version` to know,
which the roles of 0024 may not. Each may now read it, and only read it. A deployment with a
single service role (deploy/postgres/service_role.sql) already may.

A grant: no row read or written, no table's lock beyond the catalog's own.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-12
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ROLES = "settle_ledger, settle_relay, settle_inbox, settle_reconciler, settle_console"


def upgrade() -> None:
    op.execute(f"GRANT SELECT ON alembic_version TO {ROLES}")


def downgrade() -> None:
    op.execute(f"REVOKE SELECT ON alembic_version FROM {ROLES}")
