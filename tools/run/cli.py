"""`settle run`: the whole local stack, a demo batch, served until Ctrl-C; `settle demo`.

`settle run` leaves things as it found them: when it stops (Ctrl-C, SIGTERM, or a failure) it
stops the local PostgreSQL and Kafka it started itself, and leaves running those that were
already up before it began. Exit status: 0 after a clean stop, 1 when the demo batch broke a
guarantee or the stack could not start.
"""

from __future__ import annotations

import asyncio
import logging

import click
from rich.console import Console

from railsim.faults import PROFILES
from tools.run.pace import DEFAULT_RATE
from tools.run.serve import DemoBatch, serve, settings_or_exit
from tools.run.topology import LOCAL_RELAY_LEASE_SECONDS, Ports, StackOptions

RATE_HELP = "Settlements per second the batch is offered at; 0 offers it all at once."
PORTS_ENV = "SETTLE_RUN_PORTS_FROM"


@click.command()
@click.option(
    "--count",
    default=1000,
    show_default=True,
    type=click.IntRange(0),
    help="Settlements in the demo batch.",
)
@click.option("--no-demo", is_flag=True, help="Only start and serve; no demo batch.")
@click.option(
    "--rate", default=DEFAULT_RATE, show_default=True, type=click.IntRange(0), help=RATE_HELP
)
@click.option(
    "--fault-profile",
    default="demo",
    show_default=True,
    type=click.Choice(sorted(PROFILES)),
    help="The rail simulator's faults.",
)
@click.option(
    "--rail-ignores-keys",
    is_flag=True,
    help="The simulator ignores idempotency keys; relays look transfers up instead.",
)
@click.option(
    "--ports-from",
    type=click.IntRange(1024, 65530),
    envvar=PORTS_ENV,
    default=None,
    help=f"Ports P..P+9 instead of the defaults (env {PORTS_ENV}).",
)
@click.option("--seed", type=int, default=None, help="Seed of the simulator's fault dice.")
@click.option(
    "--rails",
    default="sim,sepa",
    show_default=True,
    type=click.Choice(["sim", "sim,sepa"]),
    help="The rails the stack drives; with sepa, the bank simulator runs too and the demo "
    "pays its euro settlements by SEPA credit transfer.",
)
@click.option(
    "--account-activity",
    default="realistic",
    show_default=True,
    type=click.Choice(["none", "realistic"]),
    help="What else happens on the simulated Stripe account: realistic adds other systems' "
    "charges with fees, automatic payouts and transfers, which reconciliation must leave "
    "out of scope.",
)
def run(
    count: int,
    no_demo: bool,
    rate: int,
    fault_profile: str,
    rail_ignores_keys: bool,
    ports_from: int | None,
    seed: int | None,
    rails: str,
    account_activity: str,
) -> None:
    """Start infrastructure and every service, run a demo batch, serve until Ctrl-C."""
    from services.adapters.postgres.migrate import upgrade
    from services.domain.errors import InfrastructureError
    from tools.infra import stack
    from tools.infra.paths import run_paths

    console = Console()
    settings = settings_or_exit()
    idle = stack.not_running()
    status = 1
    try:
        try:
            infra = stack.up(progress=lambda line: console.print(f"  .. {line}", style="dim"))
        except InfrastructureError as e:
            raise click.ClickException(str(e)) from e
        for component in infra.components:
            line = f"{component.name}: {component.outcome}, {component.url}"
            console.print(line, soft_wrap=True)
        upgrade(settings.database_url)
        console.print("database migrated to head; topics ready")
        ports = Ports() if ports_from is None else Ports.from_base(ports_from)
        logs = run_paths().run / "logs"
        log_dir = logs if ports_from is None else logs / f"ports-{ports_from}"
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
        options = StackOptions(
            fault_profile,
            rail_ignores_keys,
            seed,
            LOCAL_RELAY_LEASE_SECONDS,
            rails=tuple(rails.split(",")),
            bank_state=run_paths().run / f"banksim-{ports.banksim}",
            account_activity=account_activity,
            rail_state=run_paths().run / f"railsim-{ports.railsim}",
        )
        demo = DemoBatch(0 if no_demo else count, rate or None)
        status = asyncio.run(serve(ports, options, demo, log_dir, console, idle))
    finally:
        _stop_started_infra(idle, console)
    raise SystemExit(status)


def _stop_started_infra(idle: frozenset[str], console: Console) -> None:
    """Stop the local servers that were down when the run began (so this run started them)."""
    from tools.infra import stack

    if idle:
        console.print(f"stopping {' and '.join(sorted(idle))}, which this run started")
        stack.down(components=idle, progress=lambda line: console.print(f"  .. {line}"))
    else:
        console.print(
            "PostgreSQL and Kafka were up (or external) before this run; left as they are"
        )


@click.command()
@click.option("--count", default=1000, show_default=True, type=click.IntRange(1))
@click.option(
    "--rate", default=DEFAULT_RATE, show_default=True, type=click.IntRange(0), help=RATE_HELP
)
@click.option("--ledger-url", default="http://127.0.0.1:8081", show_default=True)
@click.option(
    "--rail-url",
    default=None,
    help="The simulator (default STRIPE_API_BASE, else http://127.0.0.1:12111).",
)
@click.option(
    "--fault-profile",
    default="demo",
    show_default=True,
    type=click.Choice(sorted(PROFILES)),
    help="Set on the simulator first.",
)
@click.option(
    "--timeout",
    "timeout_s",
    default=300.0,
    show_default=True,
    type=click.FloatRange(1),
    help="Seconds the batch may take to settle.",
)
def demo(
    count: int,
    rate: int,
    ledger_url: str,
    rail_url: str | None,
    fault_profile: str,
    timeout_s: float,
) -> None:
    """Submit a batch over Kafka and HTTP (with retries), follow it, report, check invariants."""
    from services.adapters.stripe.address import SIMULATOR_API
    from tools.check.errors import SourceUnavailable
    from tools.run.demo import DemoOptions, run_demo
    from tools.run.report import print_demo

    settings = settings_or_exit()
    rail = rail_url or settings.stripe_api_base or SIMULATOR_API
    options = DemoOptions(
        ledger_url, rail, count, fault_profile, rate or None, settle_timeout_s=timeout_s
    )
    console = Console()
    try:
        report = asyncio.run(run_demo(settings, options, console))
    except SourceUnavailable as e:
        raise click.ClickException(f"cannot read {e.source}: {e.detail}") from e
    print_demo(report, console)
    raise SystemExit(0 if report.ok else 1)
