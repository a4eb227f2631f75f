"""The `settle` console script: one group, one subcommand module per concern."""

from __future__ import annotations

import click

from railsim.cli import railsim
from services.apps.console_cli import console
from services.apps.inbox_cli import inbox
from services.apps.ledger_cli import ledger
from services.apps.migrate_cli import migrate
from services.apps.reconciler_cli import reconciler
from services.apps.relay_cli import relay
from tools.bench.cli import bench
from tools.chaos.cli import chaos
from tools.check.cli import check
from tools.infra.cli import infra
from tools.operations.approvals_cli import approvals
from tools.operations.archive_cli import archive
from tools.operations.breaks_cli import breaks
from tools.operations.review_cli import review
from tools.rail.cli import rail
from tools.reconcile.cli import reconcile
from tools.run.cli import demo, run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """settle: ledger, relay and inbox for settlements paid exactly once in effect."""


cli.add_command(infra)
cli.add_command(migrate)
cli.add_command(bench)
cli.add_command(ledger)
cli.add_command(railsim)
cli.add_command(relay)
cli.add_command(inbox)
cli.add_command(check)
cli.add_command(reconcile)
cli.add_command(review)
cli.add_command(breaks)
cli.add_command(approvals)
cli.add_command(archive)
cli.add_command(rail)
cli.add_command(reconciler)
cli.add_command(console)
cli.add_command(run)
cli.add_command(demo)
cli.add_command(chaos)


def main() -> None:
    """Entry point of the `settle` console script."""
    cli()
