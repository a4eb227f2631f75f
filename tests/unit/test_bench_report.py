"""The benchmarks table keeps one row per scenario and the prose around it; figures of
several runs read as their median with the smallest and the largest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench.report import (
    BenchResult,
    Figure,
    combine_runs,
    read_result,
    save_result,
    spread_of,
    update_markdown,
)


def result(scenario: str, value: float, breakdown: list[Figure] | None = None) -> BenchResult:
    return BenchResult(
        scenario=scenario,
        parameters={"clients": 4},
        figures=[Figure("throughput", value, "settlements/s")],
        machine={"cores": 2, "python": "Python 3.11", "platform": "linux"},
        measured_at="2026-11-25T00:00:00+00:00",
        breakdown=breakdown or [],
    )


def test_rows_are_replaced_per_scenario_and_prose_kept(tmp_path: Path) -> None:
    md = tmp_path / "benchmarks.md"
    md.write_text("# Benchmarks\n\nHow to read these.\n")
    update_markdown(result("ingest", 10.0), md)
    update_markdown(result("baseline", 900.0), md)
    update_markdown(result("ingest", 20.0), md)
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nHow to read these.\n")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["scenario", "baseline", "ingest"]
    assert "throughput 20.0 settlements/s" in rows[2]
    assert "10.0" not in text


def test_notes_after_the_table_survive_an_update(tmp_path: Path) -> None:
    md = tmp_path / "benchmarks.md"
    update_markdown(result("baseline", 1.0), md)
    md.write_text(md.read_text() + "\n## Notes\n\nkeep me\n")
    update_markdown(result("baseline", 2.0), md)
    assert md.read_text().endswith("## Notes\n\nkeep me\n")
    assert "throughput 2.0" in md.read_text()


def test_json_has_parameters_machine_and_figures_with_units() -> None:
    doc = json.loads(result("baseline", 900.0).to_json())
    assert doc["parameters"] == {"clients": 4}
    assert doc["machine"]["cores"] == 2
    assert doc["figures"] == [
        {
            "name": "throughput",
            "value": 900.0,
            "unit": "settlements/s",
            "low": None,
            "high": None,
            "runs": 1,
        },
    ]


def test_the_end_to_end_row_leads_the_table(tmp_path: Path) -> None:
    md = tmp_path / "benchmarks.md"
    for scenario in ("ingest", "e2e", "baseline"):
        update_markdown(result(scenario, 1.0), md)
    rows = [line for line in md.read_text().splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows if "---" not in r] == [
        "scenario",
        "e2e",
        "baseline",
        "ingest",
    ]


def test_one_run_reads_as_its_value_several_as_median_with_min_and_max() -> None:
    assert (
        str(Figure("kafka accept", 1626.0, "settlements/s")) == "kafka accept 1,626.0 settlements/s"
    )
    runs = [Figure("kafka accept", v, "settlements/s") for v in (1702.0, 1540.0, 1626.0)]
    assert str(spread_of(runs)) == ("kafka accept 1,626.0 settlements/s (1,540.0-1,702.0, 3 runs)")
    assert spread_of(runs[:2]).value == 1621.0  # an even count takes the middle two's mean
    assert spread_of(runs[:1]) == runs[0]
    with pytest.raises(ValueError):
        spread_of([])


def test_repeated_runs_keep_every_run_and_report_the_spread_in_the_row(tmp_path: Path) -> None:
    writes = [Figure("writes settlements inserted", 1.0, "rows/settlement")]
    runs = [result("ingest", v, writes) for v in (30.0, 10.0, 20.0)]
    combined = combine_runs(runs)
    assert combined.figures == [Figure("throughput", 20.0, "settlements/s", 10.0, 30.0, 3)]
    assert combined.breakdown == [
        Figure("writes settlements inserted", 1.0, "rows/settlement", 1.0, 1.0, 3)
    ]
    assert combined.parameters == {"clients": 4, "repeat": 3}
    doc = json.loads(combined.to_json())
    assert [r["figures"][0]["value"] for r in doc["runs"]] == [30.0, 10.0, 20.0]
    md = tmp_path / "benchmarks.md"
    update_markdown(combined, md)
    assert "throughput 20.0 settlements/s (10.0-30.0, 3 runs)" in md.read_text()
    assert "writes settlements" not in md.read_text()  # the breakdown stays out of the row
    assert read_result("ingest", save_result(combined, tmp_path).parent) == combined
    assert combine_runs(runs[:1]) is runs[0]


def test_a_figure_some_runs_lack_is_the_spread_of_those_that_have_it() -> None:
    one, two = result("e2e", 10.0), result("e2e", 30.0)
    two.figures.append(Figure("http p99", 5.0, "ms"))
    assert combine_runs([one, two]).figures[1] == Figure("http p99", 5.0, "ms")
