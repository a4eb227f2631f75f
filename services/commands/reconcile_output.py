"""A reconciliation run as `settle reconcile` prints it: one JSON object, or lines of text.

    {"ok": bool, "run_id": n, "status": "completed"|"failed", "error": str|null,
     "window": {"kind", "start", "end"}, "healed": n, "counts": {<every break type>: n},
     "breaks": [{"type", "settlement_id", "rail_object_id", "expected", "actual", "currency",
                 "reason", "status", "lineage"}], "pending": [...],
     "out_of_scope": {"count": n, "by_kind": {"transfer"|"payout": n},
                      "listed": [{"rail_object_id", "kind", "amount", "currency", "created"}]}}

`out_of_scope` counts the rail objects that are not settle's (no settlement named or claiming
them: another system's transfers, automatic payouts) and lists the first of them. A run
against report files adds `"statement": {"files": [{"file", "report"}], "lines": n,
"out_of_scope": {<category>: n}, "not_compared": [settlement id]}`: the lines read, those of
categories not compared, and the settlements whose transfer predates the files when the
rail's API did not answer (`print_statement` in text).

`ok` is true when the run completed and no break it found is open. Keys are sorted. A break's
`lineage` (services/reconcile/lineage.py) is null when it was not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from services.domain.breaks import BreakStatus
from services.domain.reconciliation import RunStatus
from services.reconcile.lineage import Ref
from services.reconcile.outcome import Outcome
from services.reconcile.report import break_document, counts, foreign_document, pending_document
from services.reconcile.store import stored_key

NO_OPEN_BREAK, OPEN_BREAKS, SOURCE_UNREADABLE = 0, 1, 2


def exit_status(outcome: Outcome) -> int:
    """2 if a source could not be read, else 1 if a break is open, else 0."""
    if outcome.status is not RunStatus.COMPLETED:
        return SOURCE_UNREADABLE
    return OPEN_BREAKS if outcome.open_breaks else NO_OPEN_BREAK


def run_document(outcome: Outcome, lineage: Mapping[Ref, Any] | None = None) -> dict[str, Any]:
    """The run as one JSON-ready object; `lineage` by stored key, for the breaks reported."""
    lineage = lineage or {}
    report = outcome.report()
    window = outcome.window
    return {
        "ok": exit_status(outcome) == NO_OPEN_BREAK,
        "run_id": outcome.run_id,
        "status": outcome.status.value,
        "error": outcome.error,
        "window": {
            "kind": window.kind.value,
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
        },
        "healed": outcome.healed,
        "counts": counts(report),
        "breaks": [
            break_document(b)
            | {"status": outcome.status_of(b).value, "lineage": lineage.get(stored_key(b))}
            for b in report.breaks
        ],
        "pending": [pending_document(p) for p in report.pending],
        "out_of_scope": {
            "count": sum(outcome.foreign.values()),
            "by_kind": dict(sorted(outcome.foreign.items())),
            "listed": [foreign_document(o) for o in outcome.foreign_listed],
        },
    }


def print_text(outcome: Outcome) -> None:
    """The run's verdict on a line, then a line per break."""
    window = outcome.window
    click.echo(
        f"reconciliation run {outcome.run_id} ({window.kind.value} "
        f"{window.start.isoformat()} .. {window.end.isoformat()}): {outcome.status.value}, "
        f"{outcome.open_breaks} open break(s), {len(outcome.report().pending)} pending, "
        f"{outcome.healed} healed, {sum(outcome.foreign.values())} out of scope"
    )
    if outcome.error:
        click.echo(f"  source unreadable: {outcome.error}", err=True)
    for item in outcome.report().breaks:
        status = outcome.status_of(item)
        mark = "" if status is BreakStatus.OPEN else f" [{status.value}]"
        click.echo(
            f"  {item.break_type.value}{mark} settlement={item.settlement_id} "
            f"rail={item.rail_object_id} {item.field}: expected {item.expected!r}, "
            f"actual {item.actual!r}"
        )


def print_statement(summary: Mapping[str, Any] | None) -> None:
    """After a run against report files: their lines, those of categories not compared, and
    the settlements left uncompared (their transfer predates the files, the API unread)."""
    if summary is None:
        return
    files = ", ".join(f"{f['file']} ({f['report']})" for f in summary["files"])
    scope = ", ".join(f"{k} {n}" for k, n in summary["out_of_scope"].items()) or "none"
    click.echo(f"  statement: {summary['lines']} line(s) in {files}; not compared: {scope}")
    for settlement_id in summary["not_compared"]:
        click.echo(f"  not compared: settlement={settlement_id} (its transfer predates the files)")
