"""What a benchmark run produced, as JSON and as its row in docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import services

DOCS = Path(services.__file__).resolve().parents[1] / "docs"
BENCHMARKS_MD = DOCS / "benchmarks.md"
RESULTS_DIR = DOCS / "bench"  # the latest run of each scenario as JSON
LEADING_SCENARIO = "e2e"  # the whole pipeline's row comes first: it is what a user gets
TABLE_HEADER = "| scenario | figures | parameters | machine | measured |\n|---|---|---|---|---|\n"


@dataclass(frozen=True)
class Figure:
    """One measured number with its unit, e.g. 5210.4 settlements/s; over several runs, their
    median with the smallest and the largest."""

    name: str
    value: float  # the median when several runs measured it
    unit: str
    low: float | None = None  # the smallest of several runs; None for one run
    high: float | None = None  # the largest of several runs; None for one run
    runs: int = 1  # how many runs measured it

    def __str__(self) -> str:
        spread = f" ({self.low:,.1f}-{self.high:,.1f}, {self.runs} runs)" if self.runs > 1 else ""
        return f"{self.name} {self.value:,.1f} {self.unit}{spread}"


def spread_of(figures: Sequence[Figure]) -> Figure:
    """One figure from the same figure of several runs: the median, the smallest, the largest."""
    if not figures:
        raise ValueError("no figures")
    values = [f.value for f in figures]
    if len(values) == 1:
        return figures[0]
    median = statistics.median(values)
    return Figure(figures[0].name, median, figures[0].unit, min(values), max(values), len(values))


def _spread_by_name(runs: Sequence[list[Figure]]) -> list[Figure]:
    """Each name's spread over the runs that measured it, in the order names first appear."""
    by_name: dict[str, list[Figure]] = {}
    for figures in runs:
        for figure in figures:
            by_name.setdefault(figure.name, []).append(figure)
    return [spread_of(same) for same in by_name.values()]


@dataclass(frozen=True)
class BenchResult:
    """A scenario's figures with the parameters and machine that produced them."""

    scenario: str
    parameters: dict[str, object]
    figures: list[Figure]
    machine: dict[str, object] = field(default_factory=lambda: machine())
    measured_at: str = field(
        default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds")
    )
    breakdown: list[Figure] = field(default_factory=list)  # printed and in JSON, not in the row
    runs: list[BenchResult] = field(default_factory=list)  # each run, when figures are medians

    def to_json(self) -> str:
        """The run as an indented JSON document."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def markdown_row(self) -> str:
        """The run as one row of the benchmarks table."""
        figures = "<br>".join(str(f) for f in self.figures)
        params = ", ".join(f"{k}={v}" for k, v in sorted(self.parameters.items()))
        cores = f"{self.machine['cores']} cores, {self.machine['python']}"
        return f"| {self.scenario} | {figures} | {params} | {cores} | {self.measured_at} |"


def combine_runs(results: Sequence[BenchResult]) -> BenchResult:
    """Several runs of one scenario as one result: each figure their median with its spread,
    every run kept beside it; one run is returned as it is."""
    if len(results) == 1:
        return results[0]
    last = results[-1]
    return BenchResult(
        scenario=last.scenario,
        parameters={**last.parameters, "repeat": len(results)},
        figures=_spread_by_name([r.figures for r in results]),
        machine=last.machine,
        measured_at=last.measured_at,
        breakdown=_spread_by_name([r.breakdown for r in results]),
        runs=list(results),
    )


def save_result(result: BenchResult, directory: Path = RESULTS_DIR) -> Path:
    """Keep `result` as the scenario's latest run, for ratios between scenarios."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{result.scenario}.json"
    path.write_text(result.to_json() + "\n")
    return path


def read_result(scenario: str, directory: Path = RESULTS_DIR) -> BenchResult | None:
    """The scenario's latest saved run, or None if it never ran here."""
    path = directory / f"{scenario}.json"
    if not path.exists():
        return None
    return _result_from(json.loads(path.read_text()))


def _result_from(doc: dict[str, Any]) -> BenchResult:
    return BenchResult(
        scenario=doc["scenario"],
        parameters=doc["parameters"],
        figures=[Figure(**f) for f in doc["figures"]],
        machine=doc["machine"],
        measured_at=doc["measured_at"],
        breakdown=[Figure(**f) for f in doc.get("breakdown", [])],  # absent in older files
        runs=[_result_from(run) for run in doc.get("runs", [])],
    )


def machine() -> dict[str, object]:
    """The facts about this machine a figure means nothing without."""
    return {
        "cores": os.cpu_count() or 0,
        "python": f"Python {platform.python_version()}",
        "platform": platform.platform(terse=True),
    }


def update_markdown(result: BenchResult, path: Path = BENCHMARKS_MD) -> None:
    """Replace (or add) the scenario's row in the benchmarks table, keeping the rest."""
    text = path.read_text() if path.exists() else ""
    if TABLE_HEADER not in text:
        text = (text.rstrip() + "\n\n" if text.strip() else "# Benchmarks\n\n") + TABLE_HEADER
    head, _, table = text.partition(TABLE_HEADER)
    rows, rest = _split_table(table)
    row_of = re.compile(rf"^\| {re.escape(result.scenario)} \|")
    rows = [r for r in rows if not row_of.match(r)] + [result.markdown_row()]
    rows.sort(key=_row_order)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head + TABLE_HEADER + "\n".join(rows) + "\n" + rest)


def _row_order(row: str) -> tuple[bool, str]:
    scenario = row.split("|")[1].strip()
    return scenario != LEADING_SCENARIO, scenario


def _split_table(table: str) -> tuple[list[str], str]:
    lines = table.split("\n")
    rows = [line for line in lines if line.startswith("| ")]
    rest = "\n".join(lines[len(rows) :]).lstrip("\n")
    return rows, ("\n" + rest if rest else "")
