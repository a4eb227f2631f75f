"""The reconciliation leg of a chaos verdict: what the supervised reconciler healed during the
run, then one last reconciliation of the whole run against the rail, with healing off.

The verdict holds when every status drift any run found was healed (none is left open), the
last run completed with no open break of any type, and it had nothing left to heal: whatever
webhooks the rail dropped, the reconciler had already brought the ledger to the rail's word.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from services.reconcile import windows
from services.reconcile.engine import reconcile
from services.reconcile.model import RunStatus
from services.reconcile.rail_source import RailSource
from services.shared.config import Settings
from services.shared.database import create_pool

BREAKS_BY_STATUS = """
SELECT break_type, status, count(*) AS n FROM reconciliation_breaks
 GROUP BY break_type, status ORDER BY break_type, status
"""
HEALS = "SELECT count(*) FROM operator_actions WHERE actor = 'reconciler'"
RUNS = "SELECT status, count(*) AS n FROM reconciliation_runs GROUP BY status ORDER BY status"


async def reconciliation_verdict(settings: Settings, rail_url: str) -> dict[str, Any]:
    """The reconciler's record of the run and a last read-only run over it (the last hour,
    which holds any chaos run), as the report's `reconciliation` section."""
    pool = await create_pool(settings, max_size=2)
    rail = RailSource(settings.stripe_api_key, api_base=rail_url)
    try:
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
        "drifts_healed": heals,
        "breaks": breaks,
        "final_run": {
            "run_id": final.run_id,
            "status": final.status.value,
            "open_breaks": final.open_breaks,
            "pending": len(final.pending),
            "error": final.error,
        },
        "ok": final.status is RunStatus.COMPLETED
        and final.open_breaks == 0
        and not final.pending
        and drifts_open == 0,
    }
