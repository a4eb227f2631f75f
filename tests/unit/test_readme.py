"""The README is the front door: short, the two commands first, no section anchors into it
(the manual in docs/ holds the rest)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 200


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the manual is docs/"


def test_the_readme_starts_with_the_two_commands() -> None:
    lines = [line for line in README.read_text().splitlines() if line.strip()]
    assert lines[0].startswith("# ")
    assert lines[1] == "```sh"
    assert lines[2].startswith("make run ")
    assert lines[3].startswith("make test ")


def test_the_readme_links_only_inside_the_repository() -> None:
    text = README.read_text()
    for target in re.findall(r"\]\(([^)]+)\)", text):
        if target.startswith("http"):
            continue
        assert (ROOT / target.split("#")[0]).exists(), target
    assert not re.search(r"#\d{2,}\b|issues/\d+", text), "no issue numbers in the README"


def test_nothing_points_at_a_readme_section() -> None:
    # deploy/observability's runbook links, and test_alert_rules.py which reads them, are moved
    # by their own change.
    places = ("services", "tools", "tests", "railsim", "banksim", "docs", "deploy/k8s")
    anchors = re.compile(r"(?<![\w/])README\.md#")
    for place in places:
        for path in (ROOT / place).rglob("*"):
            if path.suffix in {".py", ".md", ".yaml", ".yml", ".sh"} and path.is_file():
                text = path.read_text()
                if path.name in {"test_readme.py", "test_alert_rules.py"}:
                    continue
                assert not anchors.search(text), f"{path} points at a README section"
