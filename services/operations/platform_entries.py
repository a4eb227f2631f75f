"""One balanced journal entry between settle's own accounts (an operator's write-off or
adjustment), in the caller's transaction, beside the operator's audit row; written by the
platform's one entry writer (services/settlement/platform_entries.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from services.domain.ids import uuid7
from services.domain.postings import Posting
from services.settlement.platform_entries import PlatformEntry, book_platform_entries


def postings_document(postings: Sequence[Posting]) -> list[dict[str, object]]:
    """An entry's postings as answers and audit rows write them."""
    return [p._asdict() for p in postings]


async def book_platform_entry(
    conn: asyncpg.Connection, kind: str, postings: Sequence[Posting], now: datetime
) -> uuid.UUID:
    """Book `postings` (balanced, on the platform's accounts) as one entry of `kind`; its id."""
    entry = uuid7()
    await book_platform_entries(conn, [PlatformEntry(entry, kind, postings)], now)
    return entry
