"""The benchmarks table keeps one row per scenario and the prose around it."""

from __future__ import annotations

import json
from pathlib import Path

from tools.bench.report import BenchResult, Figure, update_markdown


def result(scenario: str, value: float) -> BenchResult:
    return BenchResult(
        scenario=scenario,
        parameters={"clients": 4},
        figures=[Figure("throughput", value, "settlements/s")],
        machine={"cores": 2, "python": "Python 3.11", "platform": "linux"},
        measured_at="2026-11-25T00:00:00+00:00",
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
    assert doc["figures"] == [{"name": "throughput", "value": 900.0, "unit": "settlements/s"}]


def test_the_end_to_end_row_leads_the_table(tmp_path: Path) -> None:
    md = tmp_path / "benchmarks.md"
    for scenario in ("ingest", "e2e", "baseline"):
        update_markdown(result(scenario, 1.0), md)
    rows = [line for line in md.read_text().splitlines() if line.startswith("| ")]
    assert [r.split("|")[1].strip() for r in rows if "---" not in r] == [
        "scenario", "e2e", "baseline", "ingest",
    ]  # fmt: skip
