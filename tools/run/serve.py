"""Serving the local stack: its children started and watched, the demo batch sent and
followed once they are up, everything stopped on Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from tools.run.topology import Ports, StackOptions

if TYPE_CHECKING:
    from services.platform.service_settings import Settings

T = TypeVar("T")
STOP_GRACE_S = 10.0


def settings_or_exit(read: Callable[[], Settings] | None = None) -> Settings:
    """The settings `read` gives (by default those of this process's environment), Kafka's
    access checked with them; a ClickException for any refused, before any server starts."""
    from services.adapters.kafka.access import kafka_access
    from services.domain.errors import ConfigError
    from services.platform.settings import load_settings

    try:
        settings = read() if read is not None else load_settings()
        kafka_access(settings)  # refused here, before any server starts, not by the demo
        return settings
    except ConfigError as e:
        raise click.ClickException(str(e)) from e


def stack_settings(env: Mapping[str, str], ports: Ports, rails: tuple[str, ...]) -> Settings:
    """The settings as the stack's services have them: those of `env`, with the stack's rails
    and its bank (ConfigError for any refused). `settle run` and `settle chaos` both read the
    stack with these."""
    from services.platform.settings import load_settings

    stack = {"SETTLE_RAILS": ",".join(rails), "SETTLE_SEPA_BANK_URL": ports.url(ports.banksim)}
    return load_settings({**env, **stack})


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


async def serve(
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

    settings = settings_or_exit(lambda: stack_settings(os.environ, ports, options.rails))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    supervisor = Supervisor(log_dir)
    status = 0
    try:
        bank = ", banksim" if "sepa" in options.rails else ""
        console.print(
            f"starting ledger, 2 relays, inbox, reconciler, console, railsim{bank} "
            f"(logs in {log_dir})"
        )
        specs = service_specs(ports, dict(os.environ), options)
        started, _ = await _until(supervisor.start_all(specs), stop)
        if started:
            print_services(supervisor, console)
            console.print(
                f"operator console: {ports.url(ports.console)}/ "
                "(sign in with a token of SETTLE_OPERATOR_TOKENS)"
            )
            console.print(
                f"operator API: {ports.url(ports.reconciler)} (the operator commands: "
                f"SETTLE_OPERATOR_API={ports.url(ports.reconciler)} and your own "
                "SETTLE_OPERATOR_TOKEN)"
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
