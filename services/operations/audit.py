"""One `operator_actions` row per operator action, in the caller's transaction: who, when,
what, and the thing before and after (the table refuses UPDATE and DELETE, migration 0004).

Under maker-checker (services/operations/approvals.py) `actor` is the operator who proposed
the action and `approved_by` the different operator who approved it (migration 0016); an
action one operator did alone has no `approved_by`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

RECORD = """
INSERT INTO operator_actions
       (actor, action, target, detail, before, after, occurred_at, approved_by)
VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7, $8)
RETURNING id
"""


async def record_action(
    conn: asyncpg.Connection,
    *,
    actor: str,
    action: str,
    target: str,
    detail: Mapping[str, Any],
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    now: datetime,
    approved_by: str | None = None,
) -> int:
    """Append the audit row of one action in the caller's transaction (`approved_by`: the
    second operator of a maker-checker action); its id."""
    row_id = await conn.fetchval(
        RECORD,
        actor,
        action,
        target,
        json.dumps(detail, sort_keys=True),
        json.dumps(before, sort_keys=True),
        json.dumps(after, sort_keys=True),
        now,
        approved_by,
    )
    return int(row_id)
