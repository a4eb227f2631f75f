"""`settle` imports a command only when it runs: its help imports none, `settle ledger` only
the ledger's; production and development commands are listed apart, each with its own help."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from services.commands import PRODUCTION
from tools.cli import DEVELOPMENT, SECTIONS, cli, load

SHOW_MODULES = """
import sys
from tools.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="settle")
except SystemExit:
    pass
ours = ("services", "tools", "railsim", "banksim")
print("\\n".join(sorted(m for m in sys.modules if m.split(".")[0] in ours)), file=sys.stderr)
"""


def imported_by(*args: str) -> set[str]:
    """The settle modules a fresh interpreter has imported after `settle ARGS`."""
    done = subprocess.run(
        [sys.executable, "-c", SHOW_MODULES, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(done.stderr.split())


def test_the_help_imports_no_command() -> None:
    assert imported_by("--help") == {"tools", "tools.cli", "services", "services.commands"}


def test_the_ledger_imports_nothing_of_the_tools_or_of_another_service() -> None:
    modules = imported_by("ledger", "--help")
    assert "services.commands.ledger" in modules
    strangers = {
        m
        for m in modules
        if m.startswith(
            (
                "tools.",
                "railsim",
                "banksim",
                "services.relay",
                "services.inbox",
                "services.reconcile",
                "services.operations",
                "services.console",
            )
        )
    }
    assert strangers == {"tools.cli"}


@pytest.mark.parametrize(
    ("name", "section"),
    [(n, s) for s, table in SECTIONS.items() for n in table],
)
def test_each_command_loads_and_its_summary_is_its_own_help(name: str, section: str) -> None:
    lazy = SECTIONS[section][name]
    command = load(lazy)
    assert command.name == name
    assert lazy.summary == command.get_short_help_str(limit=1000)


def test_production_commands_live_in_the_runtime_and_development_ones_apart() -> None:
    assert all(lazy.target.startswith("services.commands.") for lazy in PRODUCTION.values())
    assert all(
        lazy.target.startswith(("tools.", "railsim.", "banksim.")) for lazy in DEVELOPMENT.values()
    )
    assert not PRODUCTION.keys() & DEVELOPMENT.keys()


def test_the_help_lists_the_two_kinds_apart() -> None:
    text = cli.get_help(click.Context(cli, info_name="settle"))
    production, _, development = text.partition("Development commands:")
    assert "Production commands:" in production
    assert all(f"  {name} " in production for name in PRODUCTION)
    assert all(f"  {name} " in development for name in DEVELOPMENT)
