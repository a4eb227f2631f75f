"""`settle bench --repeat N`: N runs, each figure printed as its median (min-max, N runs), the
breakdown printed without its zeros, every run kept in the JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from services.platform.service_settings import Settings
from tools.bench import cli
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchOptions, Scenario


def fake(values: Iterator[float]) -> dict[str, Scenario]:
    def run(settings: Settings, options: BenchOptions) -> BenchResult:
        return BenchResult(
            scenario="fake",
            parameters={"seconds": options.seconds},
            figures=[Figure("accept", next(values), "settlements/s")],
            breakdown=[
                Figure("writes outbox deleted", 0.0, "rows/settlement"),
                Figure("writes outbox inserted", 2.0, "rows/settlement"),
            ],
        )

    return {"fake": run}


def test_repeat_prints_the_median_and_spread_and_keeps_every_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(cli, "scenarios", lambda: fake(iter([1702.0, 1540.0, 1626.0])))
    out = tmp_path / "fake.json"
    args = ["--scenario", "fake", "--repeat", "3", "--json", str(out), "--no-markdown"]
    result = CliRunner().invoke(cli.bench, args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "fake: accept 1,626.0 settlements/s (1,540.0-1,702.0, 3 runs)" in lines
    assert "fake: writes outbox inserted 2.0 rows/settlement (2.0-2.0, 3 runs)" in lines
    assert not any("outbox deleted" in line for line in lines)  # zeros stay in the JSON
    doc = json.loads(out.read_text())
    assert [run["figures"][0]["value"] for run in doc["runs"]] == [1702.0, 1540.0, 1626.0]
    assert doc["parameters"]["repeat"] == 3
    assert any(f["name"] == "writes outbox deleted" for f in doc["breakdown"])


def test_only_the_e2e_scenario_is_profiled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cli, "scenarios", lambda: fake(iter([1.0])))
    args = ["--scenario", "fake", "--profile", str(tmp_path / "graphs"), "--no-markdown"]
    result = CliRunner().invoke(cli.bench, args)
    assert result.exit_code != 0
    assert "only the e2e scenario is profiled" in result.output
