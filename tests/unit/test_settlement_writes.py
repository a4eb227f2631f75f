"""Every change to a settlement goes through the one guarded write path: read from the SQL
settle holds (every string literal of services/, railsim/ and tools/), no statement
elsewhere updates or deletes `settlements`, and only booking inserts them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import services
from services.ledger import sql as ledger_sql
from services.settlement import transition_sql

ROOT = Path(services.__file__).resolve().parent.parent
PACKAGES = (ROOT / "services", ROOT / "railsim", ROOT / "tools")

UPDATE = re.compile(r"\bUPDATE\s+(ONLY\s+)?settlements\b", re.IGNORECASE)
DELETE = re.compile(r"\bDELETE\s+FROM\s+(ONLY\s+)?settlements\b", re.IGNORECASE)
INSERT = re.compile(r"\bINSERT\s+INTO\s+settlements\b", re.IGNORECASE)


def _relative(module_file: str | None) -> str:
    assert module_file is not None
    return Path(module_file).resolve().relative_to(ROOT).as_posix()


GUARDED_PATH = _relative(transition_sql.__file__)  # the statements of transitions.py
BOOKING = _relative(ledger_sql.__file__)
# The reconcile benchmark fabricates a million settled settlements with their history in one
# statement, `--prefill` books finished settlements of history in batches, and the check's
# memory probe fills a throwaway ledger: fixtures of bench databases, no product code path
# writes settlements so.
BENCH_FIXTURES = {
    "tools/bench/reconcile_seed.py": 1,
    "tools/bench/prefill.py": 1,
    "tools/check/memory_fill.py": 1,
}


def statements(pattern: re.Pattern[str], *roots: Path) -> dict[str, int]:
    """Per file under `roots` (default: every package; named from the root's parent), how many
    string literals match."""
    found: dict[str, int] = {}
    for path in sorted(p for root in roots or PACKAGES for p in root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        hits = sum(
            1
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and pattern.search(node.value)
        )
        if hits:
            found[path.relative_to((roots or PACKAGES)[0].parent).as_posix()] = hits
    return found


def test_only_the_guarded_write_path_updates_settlements() -> None:
    assert statements(UPDATE) == {GUARDED_PATH: 1}
    assert UPDATE.search(transition_sql.WRITE_TRANSITIONS)


def test_no_statement_deletes_settlements_and_only_booking_inserts_them() -> None:
    assert statements(DELETE) == {}
    assert statements(INSERT) == {BOOKING: 1, **BENCH_FIXTURES}


def test_the_scan_finds_an_update_hidden_in_another_module(tmp_path: Path) -> None:
    # The scan reads module constants, f-strings and literals passed straight to a call.
    (tmp_path / "a.py").write_text('SQL = """\n  update  settlements SET rail_reference = $2"""\n')
    (tmp_path / "b.py").write_text(
        'async def f(c):\n    await c.execute(f"UPDATE settlements {x}")\n'
    )
    (tmp_path / "c.py").write_text('X = "SELECT * FROM settlements_archive"\n')
    found = statements(UPDATE, tmp_path)
    assert {Path(k).name: v for k, v in found.items()} == {"a.py": 1, "b.py": 1}


@pytest.mark.parametrize("pattern", [UPDATE, DELETE, INSERT], ids=["update", "delete", "insert"])
def test_the_patterns_ignore_other_tables(pattern: re.Pattern[str]) -> None:
    for sql in (
        "UPDATE settlement_transitions SET x = 1",
        "DELETE FROM settlements_archive",
        "INSERT INTO settlement_transitions VALUES (1)",
    ):
        assert not pattern.search(sql)
