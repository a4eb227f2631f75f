"""Two-person mode as the database holds it (`operator_policy`, migration 0026), and the one
action that changes it.

The mode in force is the server's setting (SETTLE_TWO_PERSON, on in production) or the
database's, whichever asks for the second operator: a server started without it cannot act
alone on a database that holds it. The database itself refuses an audit row of a guarded action
without its approver while its mode is on, so the rule holds for any writer.

Turning the mode on is one operator's action; turning it off, while it is on, is proposed and
approved by a second operator like any action that moves money, and the database refuses the
change unless it names that approved action's audit row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.operations.action_base import Doing, operator_of, required
from services.operations.audit import record_action
from services.operations.errors import BadRequest
from services.operations.rail_lookup import RailLookup

TARGET = "policy:two_person"
ACTION = "policy.two_person"
READ = "SELECT two_person, changed_at, changed_by_action FROM operator_policy"
CHANGE = """
UPDATE operator_policy SET two_person = $1, changed_at = $2, changed_by_action = $3
RETURNING two_person, changed_at, changed_by_action
"""


async def database_two_person(conn: asyncpg.Connection | asyncpg.Pool) -> bool:
    """Whether the database holds two-person mode on."""
    with unavailable_when_down("PostgreSQL is unreachable; nothing was done"):
        return bool(await conn.fetchval("SELECT two_person FROM operator_policy"))


async def policy_document(
    conn: asyncpg.Connection | asyncpg.Pool, *, server_two_person: bool, max_age_seconds: int
) -> dict[str, Any]:
    """The policy in force, as the operator API shows it."""
    with unavailable_when_down("PostgreSQL is unreachable; the policy could not be read"):
        row = await conn.fetchrow(READ)
    held = bool(row["two_person"])
    return {
        "two_person": held or server_two_person,
        "database_two_person": held,
        "server_two_person": server_two_person,
        "proposal_max_age_seconds": max_age_seconds,
        "changed_at": row["changed_at"].isoformat(),
        "changed_by_action": row["changed_by_action"],
    }


class SetTwoPerson:
    """Two-person mode turned on or off in the database (`{"on": true|false}`, a reason)."""

    checked = True

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        on = payload.get("on")
        if not isinstance(on, bool):
            raise BadRequest('say which: "on": true or false', code="invalid_on", field="on")
        return {"on": on}, required(reason)

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        return TARGET

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        by, on = operator_of(doing), bool(doing.payload["on"])
        with unavailable_when_down("PostgreSQL is unreachable; the policy was not changed"):
            async with conn.transaction():
                before = await conn.fetchrow(READ + " FOR UPDATE")
                action_id = await record_action(
                    conn,
                    actor=by.name,
                    action=ACTION,
                    target=TARGET,
                    detail={"reason": by.reason},
                    before={"two_person": before["two_person"]},
                    after={"two_person": on},
                    now=by.now,
                    approved_by=by.approver,
                )
                row = await conn.fetchrow(CHANGE, on, by.now, action_id)
        return {
            "two_person": row["two_person"],
            "changed_by_action": row["changed_by_action"],
            "operator": by.name,
            "approved_by": by.approver,
        }
