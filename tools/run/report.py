"""Rendering for people: where the stack listens, and the demo batch's report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from tools.check.report import print_table
from tools.run.demo import STATES, DemoReport
from tools.run.supervisor import Supervisor


def print_services(supervisor: Supervisor, console: Console) -> None:
    """One row per child: name, pid, port, URL, log file."""
    table = Table(title="settle run: services")
    for column in ("service", "pid", "port", "url", "log"):
        table.add_column(column)
    for spec in supervisor.specs():
        url = spec.health_url.rsplit("/", 1)[0] if spec.health_url else "-"
        log = str(supervisor.log_dir / f"{spec.name}.log")
        table.add_row(spec.name, str(supervisor.pid(spec.name)), str(spec.port or "-"), url, log)
    console.print(table)


def print_demo(report: DemoReport, console: Console) -> None:
    """Final states, HTTP answers, latency to `paid`, then the invariant table."""
    batch = report.batch
    states = Table(title=f"demo batch {batch.run_id}: {batch.count} settlements")
    states.add_column("final state")
    states.add_column("settlements", justify="right")
    for status in STATES:
        if report.statuses.get(status):
            states.add_row(status, str(report.statuses[status]))
    states.add_row("[bold]total[/]", str(sum(report.statuses.values())))
    console.print(states)
    answers = ", ".join(f"{k} {v}" for k, v in sorted(report.http.items()))
    console.print(f"Kafka commands sent: {report.commands_sent}; HTTP answers: {answers}")
    if report.latency is None:
        console.print("latency to paid: no settlement reached paid")
    else:
        lat = report.latency
        console.print(
            f"accepted -> paid over {lat.count} settlements: p50 {lat.p50 * 1000:.0f} ms, "
            f"p90 {lat.p90 * 1000:.0f} ms, p99 {lat.p99 * 1000:.0f} ms, max {lat.worst:.1f} s"
        )
    print_table(report.check, console)
    if report.settled < batch.count:
        missing = batch.count - report.settled
        console.print(f"[red]{missing} settlements of the batch did not reach a final state[/]")
    verdict = "[green]demo ok[/]" if report.ok else "[red]demo FAILED[/]"
    console.print(f"{verdict} in {report.seconds:.1f} s")
