"""Rendering a check report: one JSON object, or a small table for people."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tools.check.run import Report


def as_json(report: Report) -> dict[str, Any]:
    """`ok`, then one object per check: ok, count, offenders and each finding's figures."""
    out: dict[str, Any] = {"ok": report.ok}
    for r in report.results:
        out[r.name] = {
            "ok": r.ok,
            "count": r.count,
            "offenders": list(r.offenders),
            "detail": {f.what: {"count": f.total, "first": list(f.first)} for f in r.detail},
        }
    out["sources"] = report.sources
    out["counts"] = report.counts
    out["in_flight"] = report.in_flight
    out["quiet"] = report.quiet
    return out


def source_error_json(source: str, detail: str) -> dict[str, Any]:
    """The JSON of a run that could not read one of its sources."""
    return {"ok": False, "error": {"source": source, "detail": detail}}


def print_table(report: Report, console: Console) -> None:
    """Each guarantee on a line: holds or broken, offenders, the first ids, what broke."""
    table = Table(title="settle check")
    for column in ("guarantee", "holds", "offenders", "first ids", "broken by"):
        table.add_column(column)
    for r in report.results:
        broken = ", ".join(f"{f.what}={f.total}" for f in r.detail if f.total)
        table.add_row(
            r.name,
            "[green]yes[/green]" if r.ok else "[red]NO[/red]",
            str(r.count),
            "\n".join(r.offenders),
            broken or "-",
        )
    console.print(table)
    figures = ", ".join(f"{k} {v}" for k, v in report.counts.items())
    moving = ", ".join(f"{k} {v}" for k, v in report.in_flight.items() if v) or "nothing"
    console.print(f"read: {figures}; in flight: {moving}")
    if report.quiet is False:
        console.print("[yellow]the system did not get quiet in time; verdicts may be early[/]")
    console.print("[green]all guarantees hold[/]" if report.ok else "[red]guarantees broken[/]")
