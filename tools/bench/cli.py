"""`settle bench --scenario NAME [--repeat N] [--json FILE]`: run one scenario (N times) and
record its figures (each the median of the N runs, with the smallest and the largest)."""

from __future__ import annotations

from pathlib import Path

import click

from services.domain.errors import ConfigError
from services.platform.settings import load_settings
from tools.bench import profile
from tools.bench.report import (
    BENCHMARKS_MD,
    BenchResult,
    combine_runs,
    save_result,
    update_markdown,
)
from tools.bench.runner import BenchError, BenchOptions, scenarios

PREFILLED = ("e2e", "ingest", "console")  # the scenarios that take --prefill


@click.command()
@click.option("--scenario", "name", required=True, help="Which benchmark: baseline, ...")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the run (parameters, machine, figures) to this JSON file.",
)
@click.option("--seconds", default=BenchOptions.seconds, show_default=True, type=click.IntRange(1))
@click.option("--clients", default=BenchOptions.clients, show_default=True, type=click.IntRange(1))
@click.option("--count", default=BenchOptions.count, show_default=True, type=click.IntRange(1))
@click.option(
    "--settlements",
    default=",".join(str(n) for n in BenchOptions.settlements),
    show_default=True,
    help="Comma-separated sizes for the reconcile and reconcile-file scenarios.",
)
@click.option(
    "--rates",
    default=",".join(str(n) for n in BenchOptions.rates),
    show_default=True,
    help="Comma-separated offered settlements/s for the e2e scenario.",
)
@click.option(
    "--repeat",
    default=1,
    show_default=True,
    type=click.IntRange(1),
    help="Run the scenario N times; each figure is reported as median (min-max, N runs).",
)
@click.option(
    "--profile",
    "profile_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="e2e only: py-spy flame graphs of each service per rate, as DIR/<rate>-<service>.svg.",
)
@click.option(
    "--prefill",
    default="",
    help="e2e, ingest and console only: comma-separated settlements of history to pre-fill the "
    "database with, one run each, e.g. 0,10000000 (empty, then ten million) with ratios.",
)
@click.option("--no-markdown", is_flag=True, help=f"Do not update {BENCHMARKS_MD.name}.")
def bench(
    name: str,
    json_path: Path | None,
    seconds: int,
    clients: int,
    count: int,
    settlements: str,
    rates: str,
    repeat: int,
    profile_dir: Path | None,
    prefill: str,
    no_markdown: bool,
) -> None:
    """Run a benchmark scenario, print its figures and record them in docs/benchmarks.md."""
    available = scenarios()
    if name not in available:
        raise click.BadParameter(
            f"pick one of {', '.join(sorted(available))}", param_hint="--scenario"
        )
    try:
        settings = load_settings()
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    sizes = _numbers(settlements, "--settlements", "e.g. 100000,1000000")
    offered = _numbers(rates, "--rates", "e.g. 100,250,500")
    if any(rate < 1 for rate in offered):
        raise click.BadParameter("every rate must be at least 1", param_hint="--rates")
    fills = parse_fills(prefill)
    if fills and name not in PREFILLED:
        raise click.BadParameter(
            f"only these scenarios are pre-filled: {', '.join(PREFILLED)}", param_hint="--prefill"
        )
    options = BenchOptions(
        seconds=seconds,
        clients=clients,
        count=count,
        settlements=sizes,
        rates=offered,
        profile=profile_dir,
        prefill=fills,
    )
    try:
        if profile_dir is not None:
            _prepare_profile(name, profile_dir)
        result = combine_runs([available[name](settings, options) for _ in range(repeat)])
    except BenchError as e:
        raise click.ClickException(f"{name}: {e}") from e
    _print(result)
    if json_path is not None:
        json_path.write_text(result.to_json() + "\n")
        click.echo(f"wrote {json_path}")
    if not no_markdown:
        update_markdown(result)
        save_result(result)
        click.echo(f"updated {BENCHMARKS_MD}")


def parse_fills(text: str) -> tuple[int, ...]:
    """The `--prefill` sizes in the order given: distinct whole numbers of settlements, 0 or
    more each (`1_000_000` is read as written, for long ones); none for an empty text."""
    if not text.strip():
        return ()
    hint = "e.g. 0,10000000: distinct whole numbers of settlements, 0 for an empty database"
    try:
        fills = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(hint, param_hint="--prefill") from None
    if any(fill < 0 for fill in fills) or len(set(fills)) != len(fills):
        raise click.BadParameter(hint, param_hint="--prefill")
    return fills


def _prepare_profile(scenario: str, directory: Path) -> None:
    if scenario != "e2e":
        raise click.BadParameter("only the e2e scenario is profiled", param_hint="--profile")
    profile.py_spy()  # BenchError now, not once the stack is up, if py-spy is missing
    directory.mkdir(parents=True, exist_ok=True)


def _print(result: BenchResult) -> None:
    for figure in result.figures:
        click.echo(f"{result.scenario}: {figure}")
    # The breakdown is long and mostly zeros (tables a rate never touched): those are left to
    # the JSON.
    for figure in result.breakdown:
        if figure.value or figure.high:
            click.echo(f"{result.scenario}: {figure}")


def _numbers(text: str, option: str, example: str) -> tuple[int, ...]:
    """The whole numbers of a comma-separated option; BadParameter with `example` otherwise."""
    try:
        return tuple(int(n) for n in text.split(","))
    except ValueError:
        raise click.BadParameter(example, param_hint=option) from None
