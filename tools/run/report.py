"""Rendering for people: where the stack listens, and the demo batch's report."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tools.check.report import print_table
from tools.run.demo import STATES, DemoReport
from tools.run.latency import Latency, LatencySplit
from tools.run.supervisor import Supervisor
from tools.run.topology import HOST

# What each of the simulator's faults does to a settlement on its way to `paid`.
FAULT_COSTS = {
    "fail_before": "500 before acting; the relay retries after a backoff",
    "fail_after": "500 after the transfer was made; retried under the same key",
    "timeout_after": "answer held back; the relay's call times out, then it retries",
    "refuse": "refused by the rail; failed, never paid",
    "webhook_duplicate": "the same event twice; applied once",
    "webhook_twin": "a second event for the same change; applied once",
    "webhook_reorder": "an event held back so a later one overtakes it",
    "webhook_early": "the event before the API's answer",
    "webhook_drop": "no event at all; paid once reconciliation reads the rail",
    "reversal": "reversed after it was paid",
    "partial_reversal": "reversed in part after it was paid",
    "payout_fail": "the payout fails later",
    "payout_return": "the paid payout comes back later",
}


def print_services(supervisor: Supervisor, console: Console) -> None:
    """One row per child: name, pid, port, URL, admin URL (operator endpoints, /metrics),
    log file."""
    table = Table(title="settle run: services")
    for column in ("service", "pid", "port", "url", "admin url", "log"):
        table.add_column(column)
    for spec in supervisor.specs():
        url = spec.health_url.rsplit("/", 1)[0] if spec.health_url else "-"
        admin = f"http://{HOST}:{spec.admin_port}" if spec.admin_port else "-"
        log = str(supervisor.log_dir / f"{spec.name}.log")
        pid = str(supervisor.pid(spec.name))
        table.add_row(spec.name, pid, str(spec.port or "-"), url, admin, log)
    console.print(table)


def print_demo(report: DemoReport, console: Console) -> None:
    """Final states, HTTP answers, latency to `paid`, then the invariant table."""
    batch = report.batch
    states = Table(title=f"demo batch {batch.run_id}: {batch.count} settlements")
    states.add_column("final state")
    rails = sorted(report.by_rail) if len(report.by_rail) > 1 else []
    for rail in rails:
        states.add_column(f"on {rail}", justify="right")
    states.add_column("settlements", justify="right")
    for status in STATES:
        if report.statuses.get(status):
            each = [str(report.by_rail[rail].get(status, 0)) for rail in rails]
            states.add_row(status, *each, str(report.statuses[status]))
    each = [str(sum(report.by_rail[rail].values())) for rail in rails]
    states.add_row("[bold]total[/]", *each, str(sum(report.statuses.values())))
    console.print(states)
    answers = ", ".join(f"{k} {v}" for k, v in sorted(report.http.items()))
    console.print(f"Kafka commands sent: {report.commands_sent}; HTTP answers: {answers}")
    offered = f"offered at {report.rate}/s" if report.rate else "offered all at once"
    booked = sum(report.statuses.values())
    taken = f" ({booked / report.booked_over:.0f}/s)" if report.booked_over else ""
    console.print(
        f"{offered}; booked over {report.booked_over:.1f} s{taken}; "
        f"the whole run took {report.seconds:.1f} s"
    )
    print_latency(report.latency, console)
    print_table(report.check, console)
    if report.settled < batch.count:
        missing = batch.count - report.settled
        console.print(f"[red]{missing} settlements of the batch did not reach a final state[/]")
    print_reconciliation(report.reconciliation, console)
    verdict = "[green]demo ok[/]" if report.ok else "[red]demo FAILED[/]"
    console.print(f"{verdict} in {report.seconds:.1f} s")


def _figures(lat: Latency) -> str:
    return (
        f"p50 {lat.p50 * 1000:.0f} ms, p90 {lat.p90 * 1000:.0f} ms, "
        f"p99 {lat.p99 * 1000:.0f} ms, max {lat.worst:.1f} s"
    )


def print_latency(latency: LatencySplit, console: Console) -> None:
    """Accepted -> paid over the whole batch, over the settlements that met no fault, and a
    row per fault the simulator sent."""
    if latency.whole is None:
        console.print("latency to paid: no settlement reached paid")
        return
    whole, clean = latency.whole, latency.no_fault
    console.print(f"accepted -> paid, whole batch ({whole.count} paid): {_figures(whole)}")
    if clean is not None:
        console.print(f"accepted -> paid, met no fault ({clean.count} paid): {_figures(clean)}")
    if not latency.by_fault:
        return
    table = Table(title=f"{latency.met_fault} settlements met a fault at the rail")
    for column in ("fault", "what it does", "paid", "p50 ms", "p99 ms", "max s"):
        table.add_column(column, justify="left" if column in ("fault", "what it does") else "right")
    for name, lat in latency.by_fault.items():
        table.add_row(
            name,
            FAULT_COSTS.get(name, ""),
            str(lat.count),
            f"{lat.p50 * 1000:.0f}",
            f"{lat.p99 * 1000:.0f}",
            f"{lat.worst:.1f}",
        )
    console.print(table)


def print_reconciliation(found: dict[str, Any], console: Console) -> None:
    """The last reconciliation of the rail's account: its breaks, what it left out of scope."""
    final = found.get("final_run") or {}
    foreign = final.get("out_of_scope") or {}
    scope = ", ".join(f"{n} {kind}s" for kind, n in foreign.items()) or "none"
    mark = "[green]reconciled[/]" if found.get("ok") else "[red]reconciliation FAILED[/]"
    console.print(
        f"{mark}: run {final.get('run_id')} {final.get('status')}, "
        f"{final.get('open_breaks')} open breaks, {final.get('pending')} pending, "
        f"{found.get('drifts_healed', 0)} drifts healed during the run; "
        f"out of scope (other systems' objects on the account): {scope}"
    )
