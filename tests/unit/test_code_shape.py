"""The shape a newcomer can read at a glance: small modules and functions, and the runtime
services apart from the simulator and the tools (nothing the services run imports them)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.infra.paths import repo_root

MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
RUNTIME = ("services",)  # what the deployed services run: ledger, relay, inbox, shared
APART = ("railsim", "tools")  # the rail simulator (a test double) and the commands around it


def modules(*packages: str) -> Iterator[Path]:
    """Every Python file of `packages`, below the checkout."""
    for package in packages:
        yield from sorted((repo_root() / package).rglob("*.py"))


def imported(path: Path) -> Iterator[str]:
    """The dotted names a module imports, wherever in it (deferred imports count)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


@pytest.mark.parametrize("path", list(modules(*RUNTIME, *APART)), ids=str)
def test_module_and_its_functions_are_small(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{path}: {lines} lines"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= MAX_FUNCTION_LINES, f"{path}:{node.lineno} {node.name}: {length}"


def test_the_runtime_imports_neither_the_simulator_nor_the_tools() -> None:
    crossing = [
        f"{path.relative_to(repo_root())}: {name}"
        for path in modules(*RUNTIME)
        for name in imported(path)
        if name.split(".")[0] in APART
    ]
    assert crossing == []
