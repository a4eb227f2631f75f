"""The floors of the runtime hold: import-linter's contracts in pyproject.toml pass on the
tree as it is, and fail when a floor imports one above it or the runtime imports the tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.infra.paths import repo_root

PACKAGES = ("services", "railsim", "banksim", "tools")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the packages under `root`, with the contracts of pyproject.toml."""
    command = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(command), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages and pyproject.toml copied, for imports to be planted in."""
    root = tmp_path_factory.mktemp("layers")
    for package in PACKAGES:
        shutil.copytree(
            repo_root() / package, root / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(repo_root() / "pyproject.toml", root / "pyproject.toml")
    return root


def plant(root: Path, module: str, line: str) -> None:
    """Add `line` at the end of `module` (a path below `root`)."""
    path = root / module
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_tree_keeps_every_contract() -> None:
    result = lint_imports(repo_root())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # the pure domain reaching up to a service
        ("services/domain/money.py", "import services.ledger.booking", "built in floors"),
        # an adapter reaching into the service that uses it
        ("services/adapters/stripe/wire.py", "import services.reconcile.engine", "built in floors"),
        # one service's logic importing another's on the same floor
        ("services/relay/lease.py", "import services.inbox.store", "built in floors"),
        # one adapter leaning on another
        (
            "services/adapters/kafka/poison.py",
            "import services.adapters.postgres.database",
            "each adapter stands alone",
        ),
        # the runtime importing the development tools
        ("services/platform/backoff.py", "import tools.chaos.schedule", "development tools"),
    ],
)
def test_a_planted_import_breaks_a_contract(
    copy: Path, module: str, line: str, broken: str
) -> None:
    original = (copy / module).read_text()
    plant(copy, module, line)
    try:
        result = lint_imports(copy)
    finally:
        (copy / module).write_text(original)
    assert result.returncode != 0
    broken_line = next(x for x in result.stdout.splitlines() if "BROKEN" in x)
    assert broken in broken_line, result.stdout
