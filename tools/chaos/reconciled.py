"""The reconciliation leg of a chaos verdict: what the supervised reconciler healed during the
run, then one last reconciliation of the whole run against the rail, with healing off.

The batch is final by then, but a drift the reconciler found while a webhook was merely late
is closed by its next run (the settlement agrees with the rail now): the verdict waits for the
reconciler to complete an intraday run started after the batch was final, then judges.

The verdict holds when every status drift any run found was healed (none is left open), the
last run completed with no open break of any type, and it had nothing left to heal: whatever
webhooks the rail dropped, the reconciler had already brought the ledger to the rail's word.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from services.adapters.postgres.database import create_pool
from services.adapters.stripe.source import RailSource
from services.domain.reconciliation import RunStatus
from services.platform.service_settings import Settings
from services.reconcile import windows
from services.reconcile.engine import reconcile

BREAKS_BY_STATUS = """
SELECT break_type, status, count(*) AS n FROM reconciliation_breaks
 GROUP BY break_type, status ORDER BY break_type, status
"""
HEALS = "SELECT count(*) FROM operator_actions WHERE actor = 'reconciler'"
RUNS = "SELECT status, count(*) AS n FROM reconciliation_runs GROUP BY status ORDER BY status"
RUN_SINCE = """
SELECT count(*) FROM reconciliation_runs
 WHERE kind = 'intraday' AND status = 'completed' AND started_at >= $1
"""
WAIT_S = 180.0  # for the reconciler's next run: a few intervals of a run over the whole batch


async def reconciliation_verdict(settings: Settings, rail_url: str) -> dict[str, Any]:
    """The reconciler's record of the run and a last read-only run over it (the last hour,
    which holds any chaos run), as the report's `reconciliation` section."""
    final_since = datetime.now(UTC)
    pool = await create_pool(settings, max_size=2)
    rail = RailSource(settings.stripe_api_key.get_secret_value(), api_base=rail_url)
    try:
        waited = await _next_run(pool, final_since)
        during = {str(r["status"]): int(r["n"]) for r in await pool.fetch(RUNS)}
        heals = int(await pool.fetchval(HEALS))
        final = await reconcile(pool, rail, windows.intraday(None, datetime.now(UTC)), heal=False)
        breaks: dict[str, dict[str, int]] = {}
        for row in await pool.fetch(BREAKS_BY_STATUS):
            breaks.setdefault(str(row["break_type"]), {})[str(row["status"])] = int(row["n"])
    finally:
        await rail.aclose()
        await pool.close()
    drifts_open = breaks.get("status_drift", {}).get("open", 0)
    return {
        "runs_during": during,
        "waited_for_next_run_s": waited,
        "drifts_healed": heals,
        "breaks": breaks,
        "final_run": {
            "run_id": final.run_id,
            "status": final.status.value,
            "open_breaks": final.open_breaks,
            "pending": len(final.pending),
            "error": final.error,
            # Objects of other systems on the account: left out, counted per kind.
            "out_of_scope": dict(sorted(final.foreign.items())),
        },
        "ok": waited is not None
        and final.status is RunStatus.COMPLETED
        and final.open_breaks == 0
        and not final.pending
        and drifts_open == 0,
    }


async def _next_run(pool: asyncpg.Pool, since: datetime) -> float | None:
    """Seconds until the reconciler completed an intraday run started at or after `since`;
    None if it did not within WAIT_S."""
    began = time.monotonic()
    while not await pool.fetchval(RUN_SINCE, since):
        if time.monotonic() - began > WAIT_S:
            return None
        await asyncio.sleep(1.0)
    return round(time.monotonic() - began, 1)
