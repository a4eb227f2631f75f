"""The audit trail (`operator_actions`), newest first, a keyset page at a time, filtered by
actor, action and target (exact matches; the target through `operator_actions_target`)."""

from __future__ import annotations

from typing import NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down

PAGE = 50
LIST = """
SELECT id, actor, approved_by, action, target, detail, before, after, occurred_at
  FROM operator_actions
 WHERE ($1::bigint IS NULL OR id < $1) AND ($2::text IS NULL OR actor = $2)
   AND ($3::text IS NULL OR action = $3) AND ($4::text IS NULL OR target = $4)
 ORDER BY id DESC LIMIT $5
"""


class AuditFilter(NamedTuple):
    """Which actions to list; None matches any."""

    actor: str | None = None
    action: str | None = None
    target: str | None = None


async def actions(
    pool: asyncpg.Pool, where: AuditFilter, before: int | None
) -> list[asyncpg.Record]:
    """A page of actions matching `where`, newest first, with ids below `before` if given."""
    with unavailable_when_down("PostgreSQL is unreachable; the audit trail could not be read"):
        return list(await pool.fetch(LIST, before, *where, PAGE))
