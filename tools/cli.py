"""The `settle` console script. A command's module is imported only when that command runs
(or shows its help): `settle --help` imports none, and `settle ledger` only the ledger's.

Production commands (services/commands/) and development commands (here in tools/, and the
simulators) are listed apart."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import click

from services.commands import PRODUCTION, Lazy

DEVELOPMENT: dict[str, Lazy] = {
    "infra": Lazy(
        "tools.infra.cli:infra", "Local PostgreSQL and Kafka, run as plain processes under .run/."
    ),
    "run": Lazy(
        "tools.run.cli:run",
        "Start infrastructure and every service, run a demo batch, serve until Ctrl-C.",
    ),
    "demo": Lazy(
        "tools.run.cli:demo",
        "Submit a batch over Kafka and HTTP (with retries), follow it, report, check invariants.",
    ),
    "check": Lazy(
        "tools.check.cli:check",
        "Check the guarantees over PostgreSQL, the events topic and the rail; changes nothing.",
    ),
    "chaos": Lazy(
        "tools.chaos.cli:chaos",
        "The stack under load with seeded faults, then every guarantee checked.",
    ),
    "bench": Lazy(
        "tools.bench.cli:bench",
        "Run a benchmark scenario, print its figures and record them in docs/benchmarks.md.",
    ),
    "railsim": Lazy(
        "railsim.cli:railsim",
        "Run the rail simulator: Stripe's transfers and payouts API, signed webhooks, faults.",
    ),
    "banksim": Lazy(
        "banksim.cli:banksim",
        "Run the bank simulator: a SEPA bank's host-to-host file API, statements, faults.",
    ),
}
SECTIONS: dict[str, Mapping[str, Lazy]] = {
    "Production commands": PRODUCTION,
    "Development commands": DEVELOPMENT,
}


def load(lazy: Lazy) -> click.Command:
    """The click command `lazy` names, its module imported now."""
    module, _, attribute = lazy.target.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    assert isinstance(command, click.Command), lazy.target
    return command


class LazyGroup(click.Group):
    """A group whose commands are imported when asked for, listed by section in its help."""

    def __init__(self, sections: Mapping[str, Mapping[str, Lazy]], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.sections = sections
        self.lazy = {name: lazy for table in sections.values() for name, lazy in table.items()}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy.get(cmd_name)
        return load(lazy) if lazy else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, table in self.sections.items():
            with formatter.section(title):
                formatter.write_dl([(name, table[name].summary) for name in sorted(table)])


@click.group(
    cls=LazyGroup,
    sections=SECTIONS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def cli() -> None:
    """settle: ledger, relay and inbox for settlements paid exactly once in effect."""


def main() -> None:
    """Entry point of the `settle` console script."""
    cli()
