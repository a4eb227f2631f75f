"""The shape a newcomer can read at a glance: small modules and functions (the floors between
packages are import-linter's to hold: tests/unit/test_layers.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.infra.paths import repo_root

MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
PACKAGES = ("services", "railsim", "banksim", "tools")


def modules(*packages: str) -> Iterator[Path]:
    """Every Python file of `packages`, below the checkout."""
    for package in packages:
        yield from sorted((repo_root() / package).rglob("*.py"))


@pytest.mark.parametrize("path", list(modules(*PACKAGES)), ids=str)
def test_module_and_its_functions_are_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{path}: {lines} lines"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{path}:{node.lineno} {node.name}: {length}"
