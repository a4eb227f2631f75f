"""The one place every benchmark scenario plugs into: a name, a function, shared options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.domain.errors import SettleError
from services.platform.service_settings import Settings
from tools.bench.report import BenchResult


class BenchError(SettleError):
    """A scenario could not produce trustworthy figures (a tool failed, work went missing)."""


@dataclass(frozen=True)
class BenchOptions:
    """Knobs every scenario understands; a scenario ignores those that do not apply."""

    seconds: int = 10
    clients: int = 8
    count: int = 10_000
    settlements: tuple[int, ...] = (100_000, 1_000_000)  # the reconcile scenarios' sizes
    rates: tuple[int, ...] = (100, 250, 500)  # the e2e scenario's offered settlements/s
    profile: Path | None = None  # the e2e scenario's py-spy flame graphs go here, if set
    # The e2e, ingest and console scenarios run once per entry, on a database pre-filled with
    # that many settlements of history (0: empty); none: once, empty, figures named as always.
    prefill: tuple[int, ...] = ()


Scenario = Callable[[Settings, BenchOptions], BenchResult]


def scenarios() -> dict[str, Scenario]:
    """Every scenario by name; imported lazily so `settle --help` stays fast."""
    from tools.bench.baseline import run_baseline
    from tools.bench.console import run_console
    from tools.bench.e2e import run_e2e
    from tools.bench.inbox import run_inbox
    from tools.bench.ingest import run_ingest
    from tools.bench.reconcile import run_reconcile
    from tools.bench.reconcile_file import run_reconcile_file
    from tools.bench.relay import run_dispatch, run_relay
    from tools.bench.sepa import run_sepa

    return {
        "baseline": run_baseline,
        "console": run_console,
        "e2e": run_e2e,
        "ingest": run_ingest,
        "relay": run_relay,
        "dispatch": run_dispatch,
        "inbox": run_inbox,
        "reconcile": run_reconcile,
        "reconcile-file": run_reconcile_file,
        "sepa": run_sepa,
    }
