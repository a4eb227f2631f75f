"""`settle chaos --count N --seconds S --seed K [--runs R] [--rail-ignores-keys] [--report P]`.

Exit status: 0 in every run every guarantee holds, every submitted settlement was booked
exactly once and reached a final state, every fault landed and no process of the run is
left; 1 one of those failed in some run; 2 a run could not be carried out (a server or
service would not start) and none failed. Ctrl-C or SIGTERM stops the children and both
private servers before exiting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from pathlib import Path
from typing import Any

import click
from rich.console import Console

PASSED, BROKEN, NOT_RUN = 0, 1, 2


async def _main(options: Any, console: Console) -> tuple[dict[str, Any], Path]:
    from tools.chaos.runner import run_chaos

    task = asyncio.ensure_future(run_chaos(options, lambda line: console.print(line)))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    return await task


def _summary(report: dict[str, Any]) -> str:
    kinds: dict[str, int] = {}
    for fault in report["faults"]:
        name = f"{fault['action']} {fault['target']}"
        kinds[name] = kinds.get(name, 0) + 1
    faults = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
    broken = [
        k for k, v in report["checks"].items() if isinstance(v, dict) and v.get("ok") is False
    ]
    missed = [f"{f['action']} {f['target']}" for f in report["faults"] if not f["landed"]]
    return (
        f"faults: {faults}\nfaults that did not land: {missed or 'none'}\n"
        f"final states: {report['final_states']}\n"
        f"booked: {report['booked']}\nbroken checks: {broken or 'none'}\n"
        f"processes left: {report['leftover_processes'] or 'none'}"
    )


def _report_file(report_path: Path | None, runs: int, seed: int, run_dir: Path) -> Path:
    """Where one run's report goes: `--report` itself for one run, `seed-K.json` inside it for
    several; by default the run's own directory."""
    if report_path is None:
        return run_dir / "report.json"
    return report_path if runs == 1 else report_path / f"seed-{seed}.json"


def _one_run(options: Any, runs: int, report_path: Path | None, console: Console) -> dict[str, Any]:
    """Carry out one run, write its report, print its summary; a line for the runs' summary."""
    from services.domain.errors import InfrastructureError
    from tools.check.errors import SourceUnavailable
    from tools.run.supervisor import SupervisorError

    console.print(f"[bold]chaos run, seed {options.seed}[/]")
    try:
        report, run_dir = asyncio.run(_main(options, console))
    except (InfrastructureError, SupervisorError, SourceUnavailable) as e:
        console.print(f"[red]chaos run could not finish: {e}[/]")
        return {"seed": options.seed, "ok": None, "error": str(e)}
    target = _report_file(report_path, runs, options.seed, run_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=2) + "\n")
    console.print(_summary(report), soft_wrap=True)
    verdict = "[green]chaos ok[/]" if report["ok"] else "[red]chaos FAILED[/]"
    console.print(f"{verdict} in {report['elapsed_seconds']} s; report {target}")
    paused = sum(1 for f in report["faults"] if f["action"] in ("pause", "self_pause"))
    return {"seed": options.seed, "ok": report["ok"], "report": str(target), "pauses": paused}


@click.command(short_help="The stack under load with seeded faults, then every guarantee checked.")
@click.option("--count", default=1000, show_default=True, type=click.IntRange(2))
@click.option(
    "--seconds",
    default=60.0,
    show_default=True,
    type=click.FloatRange(20),
    help="Length of the fault schedule; the load goes out over its first 75 %.",
)
@click.option("--seed", default=1, show_default=True, type=int, help="Decides the faults.")
@click.option(
    "--runs",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Runs one after another, the n-th (from 0) with seed SEED+n.",
)
@click.option(
    "--rail-ignores-keys",
    is_flag=True,
    help="The simulator ignores idempotency keys; relays look transfers up instead.",
)
@click.option(
    "--rails",
    default="sim",
    show_default=True,
    type=click.Choice(["sim", "sepa", "sim,sepa"]),
    help="The rails the stack drives; with sepa, the bank simulator runs with its chaos "
    "faults, is killed like every service, and relays are killed between a file's upload "
    "and its record.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the JSON report goes (default <run dir>/chaos/seed-K/report.json); with "
    "--runs above 1, a directory for seed-K.json of each run and summary.json.",
)
def chaos(
    count: int,
    seconds: float,
    seed: int,
    runs: int,
    rail_ignores_keys: bool,
    rails: str,
    report_path: Path | None,
) -> None:
    """The stack under load with seeded faults (kills, relays paused past their lease at the
    moments that matter, Kafka and PostgreSQL restarts, rail faults), then wait for quiet and
    check every guarantee."""
    from tools.chaos.runner import ChaosOptions
    from tools.infra.paths import run_paths

    console = Console()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    # The broker is down on purpose for a while; its clients' reconnect warnings are expected.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    results = []
    try:
        for n in range(runs):
            options = ChaosOptions(
                count, seconds, seed + n, rail_ignores_keys, tuple(rails.split(","))
            )
            results.append(_one_run(options, runs, report_path, console))
    except asyncio.CancelledError:
        console.print("[yellow]chaos run interrupted; everything it started is stopped[/]")
        raise SystemExit(NOT_RUN) from None
    held = [r["seed"] for r in results if r["ok"] is True]
    broken = [r["seed"] for r in results if r["ok"] is False]
    if runs > 1:
        summary = {"runs": runs, "held": len(held), "broken_seeds": broken, "results": results}
        target = (report_path or run_paths().run / "chaos") / "summary.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(summary, indent=2) + "\n")
        console.print(f"chaos: {len(held)} of {runs} runs held; broken seeds: {broken or 'none'}")
    raise SystemExit(BROKEN if broken else PASSED if len(held) == runs else NOT_RUN)
