"""The alert rules in deploy/observability/ are valid Prometheus rules and pass their unit
tests under promtool, each alert pages with a severity and links its section of the manual's
runbooks (docs/runbooks.md) under the one base address prometheus.yml sets, and each is tested
both firing and silent; every service is watched for being down and for being absent.
promtool comes from Debian's `prometheus` package, installed here when missing and root (as
the servers are); otherwise the test fails saying how to get it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.infra.procs import tool

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy" / "observability"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
RUNBOOK_URL = "{{ $externalLabels.runbook_base }}/runbooks/#"
SERVICES = {"ledger", "relay", "inbox", "reconciler", "console"}
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
    assert len(alerts) >= 20
    sections = re.findall(r"^## (\w+)$", RUNBOOKS.read_text(), flags=re.M)
    for rule in alerts:
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert rule["annotations"]["runbook_url"] == RUNBOOK_URL + rule["alert"].lower()
        assert rule["annotations"]["summary"], rule["alert"]
    # One section a rule, its heading the anchor (MkDocs: the heading in lower case).
    assert sections == [rule["alert"] for rule in alerts]
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    assert config["global"]["external_labels"]["runbook_base"].startswith("https://")


def test_every_service_pages_when_down_or_absent() -> None:
    exprs = {rule["alert"]: rule["expr"] for rule in _alerts()}
    severity = {rule["alert"]: rule["labels"]["severity"] for rule in _alerts()}
    assert severity["SettleServiceDown"] == severity["SettleServiceAbsent"] == "page"
    (down,) = re.findall(r'up\{job=~"([\w|]+)"\}', exprs["SettleServiceDown"])
    assert set(down.split("|")) == SERVICES
    absent = set(
        re.findall(r'absent_over_time\(\w+\{job="(\w+)"\}\[10m\]\)', exprs["SettleServiceAbsent"])
    )
    assert absent == SERVICES


def test_each_alert_is_tested_firing_and_silent() -> None:
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case["exp_alerts"]))
    assert {rule["alert"]: {True, False} for rule in _alerts()} == cases
