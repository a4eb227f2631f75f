"""Every operator action has one implementation and one front door: each kind of action is in
the registry, and nothing but the desk calls maker-checker's entry points, so the HTTP routes
and the console cannot drift apart; the operator commands hold no desk and no database at
all, only a client of the operator API."""

from __future__ import annotations

import ast
from pathlib import Path

from services.domain.break_work import BreakAction
from services.domain.proposal import ProposedAction
from services.operations.actions import ACTIONS
from tools.infra.paths import repo_root

ENTRY_POINTS = {"submit", "propose", "approve", "reject", "withdraw", "list_proposals"}
FRONT_DOOR = Path("services/operations/desk.py")
SURFACES = (
    "services/operations/http.py",
    "services/operations/inbox_http.py",
    "services/console/actions.py",
)
# The operator commands: clients of the operator API.
CLIENTS = (
    "services/commands/review.py",
    "services/commands/breaks.py",
    "services/commands/break_work.py",
    "services/commands/approvals.py",
    "services/commands/inbox.py",
)
# What would give a command the database, the rail's key or the policy itself.
SERVER_SIDE = ("OperationsDesk", "database(", "create_pool", "load_settings(kind=Settings", "desk(")


def callers_of_entry_points() -> set[str]:
    """The modules of the runtime that name one of maker-checker's entry points as imported
    from services.operations.approvals, or call it on that module."""
    found = set()
    for path in sorted((repo_root() / "services").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            imported = (
                isinstance(node, ast.ImportFrom)
                and node.module == "services.operations.approvals"
                and any(alias.name in ENTRY_POINTS for alias in node.names)
            )
            called = (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "approvals"
                and node.attr in ENTRY_POINTS
            )
            if imported or called:
                found.add(path.relative_to(repo_root()).as_posix())
    return found


def test_every_kind_of_action_is_registered_once() -> None:
    assert set(ACTIONS) == set(ProposedAction) | set(BreakAction)


def test_only_the_desk_calls_maker_checkers_entry_points() -> None:
    assert callers_of_entry_points() == {FRONT_DOOR.as_posix()}


def test_each_surface_goes_through_the_desk() -> None:
    for surface in SURFACES:
        assert "OperationsDesk" in (repo_root() / surface).read_text(), surface


def test_the_operator_commands_only_talk_to_the_operator_api() -> None:
    for client in CLIENTS:
        text = (repo_root() / client).read_text()
        assert "through_api" in text, client
        replay = text.partition("def replay_command")[2] if client.endswith("inbox.py") else text
        assert not [s for s in SERVER_SIDE if s in replay], client
