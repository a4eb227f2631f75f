"""The rows of maker-checker (approvals.py): its statements over `operator_proposals`, and
the document a proposal row is given as."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from services.domain.proposal import ProposalStatus, is_expired

COLUMNS = """id, action, target, payload, reason, proposed_by, proposed_at, status, decided_by,
       decided_at, outcome"""
EXPIRE_STALE = """
UPDATE operator_proposals SET status = 'expired', decided_at = $3
 WHERE action = $1 AND target = $2 AND status = 'pending' AND proposed_at <= $4
"""
INSERT = f"""
INSERT INTO operator_proposals (action, target, payload, reason, proposed_by, proposed_at)
VALUES ($1, $2, $3::jsonb, $4, $5, $6) RETURNING {COLUMNS}
"""
PENDING_OF = """
SELECT id FROM operator_proposals WHERE action = $1 AND target = $2 AND status = 'pending'
"""
LOCK = f"SELECT {COLUMNS} FROM operator_proposals WHERE id = $1 FOR UPDATE"
DECIDE = f"""
UPDATE operator_proposals SET status = $2, decided_by = $3, decided_at = $4, outcome = $5::jsonb
 WHERE id = $1 AND status = 'pending' RETURNING {COLUMNS}
"""
# Pending ones past their age are listed as expired, though not yet written so.
LIST = f"""
SELECT {COLUMNS} FROM operator_proposals
 WHERE id > $1 AND ($3::text IS NULL OR status = $3)
   AND ($4::timestamptz IS NULL OR status <> 'pending' OR proposed_at > $4)
 ORDER BY id LIMIT $2
"""


def proposal_document(row: asyncpg.Record, now: datetime, max_age: timedelta) -> dict[str, Any]:
    """A proposal as listings and answers give it; a pending one past its age shows expired."""
    item = dict(row)
    stale = row["status"] == "pending" and is_expired(row["proposed_at"], now, max_age)
    item["status"] = str(ProposalStatus.EXPIRED) if stale else row["status"]
    item["id"] = int(row["id"])
    for key in ("payload", "outcome"):
        item[key] = json.loads(row[key]) if row[key] is not None else None
    for key in ("proposed_at", "decided_at"):
        item[key] = row[key].isoformat() if row[key] else None
    return item
