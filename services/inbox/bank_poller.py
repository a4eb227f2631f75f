"""The SEPA rail's reports, fetched from the bank and stored before anything reads them, then
handed to the inbox transaction by transaction.

`fetch` pages through the reports the bank delivered since the stored cursor and keeps each
one's bytes under the bank's id (`bank_reports`), one kind and MsgId once; the cursor moves in
the transaction that stores the page, so a crash fetches a page again and stores nothing
twice. `read_stored` then reads each stored report through the hardened parser: one that
cannot be read whole is `parked` with the reason and nothing of it is applied; the others
become rail events (`bank_events`), stored in the inbox in the transaction that marks the
report `applied`, where the inbox's worker applies them with the same decision table and
guarded transitions as a webhook.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import date

import asyncpg

from services.adapters.sepa.bank import Bank
from services.adapters.sepa.errors import SepaFileError
from services.adapters.sepa.pain001_read import read_pain001
from services.adapters.sepa.pain002 import StatusReport
from services.adapters.sepa.reports import read_report
from services.domain.sepa import end_to_end_id, settlement_of
from services.inbox.bank_events import SentTransfer, decided_in, event_bodies
from services.inbox.events import parse_event
from services.inbox.intake import Arrival, insert_events
from services.platform.clock import utc_now

log = logging.getLogger(__name__)

CURSOR = "SELECT position FROM bank_cursors WHERE rail = $1 AND listing = 'reports'"
MOVE_CURSOR = """
INSERT INTO bank_cursors (rail, listing, position, updated_at) VALUES ($1, 'reports', $2, $3)
ON CONFLICT (rail, listing) DO UPDATE SET position = $2, updated_at = $3
"""
STORE_REPORT = """
INSERT INTO bank_reports (report_id, rail, kind, msg_id, business_date, content, status,
                          received_at)
VALUES ($1, $2, $3, $4, $5, $6, 'stored', $7)
ON CONFLICT DO NOTHING
RETURNING report_id
"""
CLAIM_STORED = """
SELECT report_id, kind, content FROM bank_reports
 WHERE rail = $1 AND status = 'stored'
 ORDER BY received_at, report_id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
"""
RECORD = """
UPDATE bank_reports SET status = $2, reason = $3, applied_at = $4
 WHERE report_id = $1 AND status = 'stored'
"""
OUR_FILE = "SELECT content FROM bank_files WHERE msg_id = $1"
SENT = """
SELECT settlement_id, amount, destination FROM rail_instructions
 WHERE settlement_id = ANY($1::uuid[]) AND rail = $2
"""


class BankReportPoller:
    """See the module docstring."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        bank: Bank,
        rail: str = "sepa",
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.pool, self.bank, self.rail = pool, bank, rail
        self.wake = wake  # tells the inbox's worker there are events to apply

    async def poll(self) -> int:
        """Fetch what is new, then read what is stored; the reports read."""
        await self.fetch()
        return await self.read_stored()

    async def fetch(self) -> int:
        """Store every report delivered since the cursor; how many were new."""
        async with self.pool.acquire() as conn:
            cursor = await conn.fetchval(CURSOR, self.rail)
        stored = 0
        while True:
            page = await self.bank.reports(after=cursor)
            if not page.items:
                return stored
            fetched = [
                (item, await self.bank.report(str(item["report_id"]))) for item in page.items
            ]
            now = utc_now()
            async with self.pool.acquire() as conn, conn.transaction():
                for item, content in fetched:
                    new = await conn.fetchval(
                        STORE_REPORT,
                        str(item["report_id"]),
                        self.rail,
                        str(item["kind"]),
                        _text(item.get("msg_id")),
                        _day(item.get("business_date")),
                        content,
                        now,
                    )
                    stored += new is not None
                await conn.execute(MOVE_CURSOR, self.rail, page.next, now)
            cursor = page.next

    async def read_stored(self, limit: int = 20) -> int:
        """Read up to `limit` stored reports into the inbox (or park them); how many."""
        async with self.pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM_STORED, self.rail, limit)
            for row in rows:
                await self._read(conn, row["report_id"], row["kind"], bytes(row["content"]))
        if rows:
            self.wake()
        return len(rows)

    async def _read(self, conn: asyncpg.Connection, report_id: str, kind: str, data: bytes) -> None:
        now = utc_now()
        try:
            report = read_report(data)
        except SepaFileError as e:
            log.warning("bank report %s (%s) parked: %s", report_id, kind, e.reason)
            await conn.execute(RECORD, report_id, "parked", e.reason, now)
            return
        files = await _our_files(conn, report) if isinstance(report, StatusReport) else {}
        decided = decided_in(report, files)
        sent = await _sent(conn, [d.end_to_end_id for d in decided], self.rail)
        bodies = event_bodies(kind, report.msg_id, decided, sent, int(now.timestamp()))
        arrivals = [Arrival(parse_event(body), body, now) for body in bodies]
        if arrivals:
            await insert_events(conn, arrivals, self.rail)
        await conn.execute(RECORD, report_id, "applied", None, now)


async def _our_files(conn: asyncpg.Connection, report: StatusReport) -> dict[str, list[str]]:
    """The EndToEndIds of the file a status report speaks of, by its MsgId and by each of
    its payment blocks' PmtInfId; {} when it is not a file of ours."""
    content = await conn.fetchval(OUR_FILE, report.original_msg_id)
    if content is None:
        return {}
    contents = read_pain001(bytes(content))
    by_id: dict[str, list[str]] = {contents.msg_id: []}
    for transfer in contents.transfers:
        by_id[contents.msg_id].append(transfer.end_to_end_id)
        by_id.setdefault(transfer.payment_info_id, []).append(transfer.end_to_end_id)
    return by_id


async def _sent(
    conn: asyncpg.Connection, end_to_end_ids: Sequence[str], rail: str
) -> Mapping[str, SentTransfer]:
    sids = [sid for e2e in end_to_end_ids if (sid := settlement_of(e2e)) is not None]
    rows = await conn.fetch(SENT, sids, rail)
    return {
        end_to_end_id(str(r["settlement_id"])): SentTransfer(r["amount"], r["destination"])
        for r in rows
    }


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
