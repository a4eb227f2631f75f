"""`settle run`: the whole local stack, a demo batch, served until Ctrl-C; `settle demo`.

`settle run` leaves things as it found them: when it stops (Ctrl-C, SIGTERM, or a failure) it
stops the local PostgreSQL and Kafka it started itself, and leaves running those that were
already up before it began. Exit status: 0 after a clean stop, 1 when the demo batch broke a
guarantee or the stack could not start.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from railsim.faults import PROFILES
from tools.run.pace import DEFAULT_RATE
from tools.run.topology import LOCAL_RELAY_LEASE_SECONDS, Ports, StackOptions

if TYPE_CHECKING:
    from services.platform.service_settings import Settings

T = TypeVar("T")
RATE_HELP = "Settlements per second the batch is offered at; 0 offers it all at once."
PORTS_ENV = "SETTLE_RUN_PORTS_FROM"
STOP_GRACE_S = 10.0


def _settings() -> Settings:
    from services.adapters.kafka.access import kafka_access
    from services.domain.errors import ConfigError
    from services.platform.settings import load_settings

    try:
        settings = load_settings()
        kafka_access(settings)  # refused here, before any server starts, not by the demo
        return settings
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


async def _until(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> tuple[bool, T | None]:
    """Run `work` unless `stop` is set first (then cancel it): (finished, its result)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    if task.cancelled():
        return False, None
    return True, task.result()


async def _serve(
    ports: Ports,
    options: StackOptions,
    demo: DemoBatch,
    log_dir: Path,
    console: Console,
    started_infra: frozenset[str],
) -> int:
    from tools.run.report import print_services
    from tools.run.supervisor import Supervisor, SupervisorError
    from tools.run.topology import service_specs

    settings = _settings()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    supervisor = Supervisor(log_dir)
    status = 0
    try:
        console.print(
            f"starting ledger, 2 relays, inbox, reconciler, console, railsim (logs in {log_dir})"
        )
        specs = service_specs(ports, dict(os.environ), options)
        started, _ = await _until(supervisor.start_all(specs), stop)
        if started:
            print_services(supervisor, console)
            console.print(
                f"operator console: {ports.url(ports.console)}/ "
                "(sign in with a token of SETTLE_OPERATOR_TOKENS)"
            )
        if started and demo.count:
            status = await _demo(settings, ports, demo, console, stop)
        if started:
            console.print(f"serving; Ctrl-C stops the services{_and_infra(started_infra)}.")
            await stop.wait()
    except SupervisorError as e:
        console.print(f"[red]{e}[/]")
        status = 1
    finally:
        console.print("stopping the services")
        await supervisor.stop_all(grace=STOP_GRACE_S)
        console.print("all services stopped")
    return status


async def _demo(
    settings: Settings, ports: Ports, demo: DemoBatch, console: Console, stop: asyncio.Event
) -> int:
    """Send the demo batch, follow it and print its report; the exit status it earns."""
    import asyncpg
    import httpx
    from aiokafka.errors import KafkaError

    from tools.check.errors import SourceUnavailable
    from tools.run.demo import DemoOptions, run_demo
    from tools.run.report import print_demo

    batch = DemoOptions(
        ports.url(ports.ledger),
        ports.url(ports.railsim),
        demo.count,
        None,
        demo.rate,
        relays=len(ports.relays),
    )
    failures = (SourceUnavailable, httpx.HTTPError, OSError, asyncpg.PostgresError, KafkaError)
    try:
        finished, report = await _until(run_demo(settings, batch, console), stop)
    except failures as e:
        console.print(f"[red]demo could not finish: {e}[/]")
        return 1
    if finished and report is not None:
        print_demo(report, console)
        return 0 if report.ok else 1
    return 0


@dataclass(frozen=True)
class DemoBatch:
    """The demo batch `settle run` sends once the stack is up."""

    count: int  # 0: no demo
    rate: int | None  # settlements offered per second; None: all at once


def _and_infra(started: frozenset[str]) -> str:
    names = " and ".join(n for n in ("postgres", "kafka") if n in started)
    return f" and the {names} this run started" if names else ""


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
    help=f"Ports P..P+8 instead of the defaults (env {PORTS_ENV}).",
)
@click.option("--seed", type=int, default=None, help="Seed of the simulator's fault dice.")
def run(
    count: int,
    no_demo: bool,
    rate: int,
    fault_profile: str,
    rail_ignores_keys: bool,
    ports_from: int | None,
    seed: int | None,
) -> None:
    """Start infrastructure and every service, run a demo batch, serve until Ctrl-C."""
    from services.adapters.postgres.migrate import upgrade
    from services.domain.errors import InfrastructureError
    from tools.infra import stack
    from tools.infra.paths import run_paths

    console = Console()
    settings = _settings()
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
        options = StackOptions(fault_profile, rail_ignores_keys, seed, LOCAL_RELAY_LEASE_SECONDS)
        demo = DemoBatch(0 if no_demo else count, rate or None)
        status = asyncio.run(_serve(ports, options, demo, log_dir, console, idle))
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

    settings = _settings()
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
