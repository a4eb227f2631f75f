"""The alert rules in deploy/observability/ are valid Prometheus rules and pass their unit
tests under promtool, each alert pages with a severity and its runbook, and each is tested
both firing and silent. promtool comes from Debian's `prometheus` package, installed here
when missing and root (as the servers are); otherwise the test fails saying how to get it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.infra.procs import tool

OBSERVABILITY = Path(__file__).resolve().parents[2] / "deploy" / "observability"
RULES = OBSERVABILITY / "alerts.yaml"
RULE_TESTS = OBSERVABILITY / "alerts_test.yaml"


@pytest.fixture(scope="module")
def promtool() -> str:
    return tool("promtool", "prometheus", "the alert rules are tested with promtool")


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _promtool(promtool: str, *args: str) -> None:
    done = subprocess.run(
        [promtool, *args],
        cwd=OBSERVABILITY,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_rules_are_valid(promtool: str) -> None:
    _promtool(promtool, "check", "rules", RULES.name)


def test_the_rules_pass_their_tests(promtool: str) -> None:
    _promtool(promtool, "test", "rules", RULE_TESTS.name)


def test_each_alert_pages_with_a_severity_and_its_runbook() -> None:
    alerts = _alerts()
    assert len(alerts) >= 8
    for rule in alerts:
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert rule["annotations"]["runbook"] == f"README.md#{rule['alert'].lower()}"
        assert rule["annotations"]["summary"], rule["alert"]


def test_each_alert_is_tested_firing_and_silent() -> None:
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
    assert {rule["alert"]: {True, False} for rule in _alerts()} == cases
