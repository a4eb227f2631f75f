"""Console sessions bound to the token they were opened with: `console_sessions.token_digest`.

A session keeps the SHA-256 of the operator token it was signed in with (never the token), and
the console checks on every request that the digest is still of a token its operator holds
(`SETTLE_OPERATOR_TOKENS`): rotating an operator's token ends every session the old token
opened, where it used to end only once the operator held no token at all.

The column has no default and is nullable, so adding it rewrites nothing; its CHECK is added
NOT VALID, so no row is scanned under the lock (every row written from now on is checked, and
the rows already there hold NULL). A session opened before this migration has no digest and is
refused: its operator signs in again, once.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-10
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIGEST_CHECK = "console_sessions_token_digest"


def upgrade() -> None:
    op.execute("ALTER TABLE console_sessions ADD COLUMN token_digest bytea")
    op.execute(
        f"""ALTER TABLE console_sessions ADD CONSTRAINT {DIGEST_CHECK}
              CHECK (token_digest IS NULL OR length(token_digest) = 32) NOT VALID"""
    )


def downgrade() -> None:
    op.execute("ALTER TABLE console_sessions DROP COLUMN token_digest")
