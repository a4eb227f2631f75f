"""A statement's lines that amend other lines, applied in SQL to the run's staged objects.

Once every transfer and payout of the files is staged (each id once: a second line naming one
is refused, naming that line):

    transfer_reversal   its amount is added to the amount reversed of the transfer naming the
                        same settlement; of two or more (a duplicate at the rail, which
                        compare reports), to the one compare reads first: the one the
                        settlement's reference names, else the earliest. Reversals beyond the
                        transfer's amount are refused, naming the line that went beyond.
    payout_reversal     the payout failed

A reversal whose transfer the files do not list (it was made before their period) is of the
transfer the settlement's reference names: that transfer is retrieved from the rail's API when
one is given and answers, and staged as retrieved by id; else the settlement is left
uncompared (never missing_at_rail), and so is the settlement of a returned payout the files do
not list. Only the amending lines are held in memory, never the files. Then the window is
judged in SQL (`Staging.judge`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.adapters.stripe.source import RailSource
from services.domain.rail import RailReadError
from services.reconcile import ledger_source
from services.reconcile.errors import StatementUnreadable
from services.reconcile.staging import Staging
from services.reconcile.staging_sql import TABLE
from services.reconcile.statement import Return, Reversal

COPIES = f"""
SELECT object_id FROM {TABLE} WHERE run_id = $1
 GROUP BY object_id HAVING count(*) > 1 ORDER BY object_id LIMIT 1
"""
NAMING = f"""
SELECT st.object_id, st.settlement_id, st.amount, st.created FROM {TABLE} AS st
  JOIN unnest($2::text[]) AS r (settlement_id) ON st.settlement_id = r.settlement_id
 WHERE st.run_id = $1 AND st.kind = 'transfer'
 ORDER BY st.created, st.object_id
"""
REVERSE = f"""
UPDATE {TABLE} AS st SET amount_reversed = u.reversed
  FROM unnest($2::text[], $3::bigint[]) AS u (object_id, reversed)
 WHERE st.run_id = $1 AND st.object_id = u.object_id
"""
FAIL = f"""
UPDATE {TABLE} SET status = 'failed'
 WHERE run_id = $1 AND kind = 'payout' AND object_id = ANY($2::text[])
RETURNING object_id
"""
_DOWN = "PostgreSQL is unreachable; the statement's reversals could not be applied"


@dataclass
class Amends:
    """The lines of a statement that amend others, by file name, and what they left out."""

    reversals: list[tuple[str, Reversal]] = field(default_factory=list)
    returns: list[tuple[str, Return]] = field(default_factory=list)
    uncompared: list[str] = field(default_factory=list)  # settlement ids, once amended


async def amend(
    staging: Staging,
    amends: Amends,
    api: RailSource | None,
    second_line: Callable[[str], tuple[str, int]],
) -> None:
    """Apply the amending lines to the staged objects, fetch (or leave uncompared) what they
    name before the files' period, and judge the window in SQL from now on."""
    pool = staging.pool
    with unavailable_when_down(_DOWN):
        copied = await pool.fetchval(COPIES, staging.run_id)
    if copied is not None:
        name, line = second_line(copied)
        raise StatementUnreadable(line, f"{name}: {copied} is on a second line")
    orphans = await _reverse(staging, amends.reversals)
    returns = {r.payout_id for _, r in amends.returns}
    with unavailable_when_down(_DOWN):
        failed = await pool.fetch(FAIL, staging.run_id, sorted(returns))
    returned = returns - {row["object_id"] for row in failed}
    amends.uncompared = await _fetch(staging, orphans, sorted(returned), api)
    staging.judge(amends.uncompared)


async def _reverse(staging: Staging, reversals: Sequence[tuple[str, Reversal]]) -> list[str]:
    """Add each settlement's reversals to its transfer; the settlements reversed whose
    transfer the files do not list."""
    if not reversals:
        return []
    lines: dict[str, list[tuple[str, Reversal]]] = {}
    for name, reversal in reversals:
        lines.setdefault(reversal.settlement_id, []).append((name, reversal))
    with unavailable_when_down(_DOWN):
        rows = await staging.pool.fetch(NAMING, staging.run_id, sorted(lines))
    transfers: dict[str, list[asyncpg.Record]] = {}
    for row in rows:  # earliest first, as compare orders a settlement's objects
        transfers.setdefault(row["settlement_id"], []).append(row)
    twice = [sid for sid, found in transfers.items() if len(found) > 1]
    referenced = {
        r.settlement_id: r.rail_reference
        for r in await ledger_source.by_ids(staging.pool, twice, staging.rails)
    }
    reversed_to: dict[str, int] = {}
    for sid, found in transfers.items():
        first = next((t for t in found if t["object_id"] == referenced.get(sid)), found[0])
        taken = 0
        for name, reversal in lines[sid]:
            taken += reversal.amount
            if taken > first["amount"]:
                raise StatementUnreadable(
                    reversal.line, f"{name}: reversals of {first['object_id']} exceed its amount"
                )
        reversed_to[first["object_id"]] = taken
    with unavailable_when_down(_DOWN):
        await staging.pool.execute(
            REVERSE, staging.run_id, list(reversed_to), list(reversed_to.values())
        )
    return sorted(lines.keys() - transfers.keys())


async def _fetch(
    staging: Staging, orphans: list[str], returned: list[str], api: RailSource | None
) -> list[str]:
    """Retrieve from the rail's API (and stage) the transfers the orphan reversals' settlements
    reference and the returned payouts the files do not list; the settlements left uncompared:
    all of theirs if the API is not given or does not answer."""
    if not orphans and not returned:
        return []
    records = await ledger_source.by_ids(staging.pool, orphans, staging.rails)
    references = {r.rail_reference: r.settlement_id for r in records if r.rail_reference}
    known = {r.settlement_id for r in records}
    # a settlement the ledger does not have: nothing to retrieve, nothing to compare
    unknown = {o for o in orphans if _canonical(o) not in known}
    if api is not None:
        try:
            await staging.add_retrieved(await api.retrieve([*references, *returned]))
        except RailReadError:
            pass
        else:  # the rail answered: only settlements with no reference to retrieve are left
            return sorted(unknown | (known - set(references.values())))
    with unavailable_when_down(_DOWN):
        claims = await staging.pool.fetch(ledger_source.FIRST_CLAIMS, returned)
    return sorted(unknown | known | {str(row["id"]) for row in claims})


def _canonical(text: str) -> str:
    """A settlement id as the ledger writes it, if `text` is one; else `text`."""
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return text
