"""`settle config check --service NAME [--env-file FILE] [--json]`: what a service would
refuse to start with in production, every refusal at once, before a deploy.

NAME is a service command's name (ledger, relay, inbox, reconciler, console, migrate) or
`operator`, for the operators' commands (review, breaks, approvals, inbox replay), which hold
the operator API's address and the operator's own token and nothing else. The
settings are read as that service reads them, with `SETTLE_ENV=production`, from this
process's environment or, with `--env-file`, from the file's `KEY=VALUE` lines alone (blank
lines and `#` comments skipped, an `export ` prefix and one pair of surrounding quotes
dropped). The rules are the very ones a service runs at start (`refusals` in
services/platform/settings.py), so a check and a start never disagree; what only the
running service can see (a Kafka file missing on its host, a database role owning tables)
is not checked here. Each refusal is printed on a line of its own, `VARIABLE: why` (with
`--json`, one list of `{"variable": ..., "reason": ...}`), and no secret's value is.

Exit status: 0 when the service would start, 1 when anything is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import click

from services.commands.common import json_option
from services.platform.config import Deployment, Section
from services.platform.service_settings import SERVICES, OperatorCommandSettings
from services.platform.settings import refusals

OPERATOR = "operator"  # the operators' commands: the operator API's address and a token
PREFIXES = ("SETTLE_", "STRIPE_")  # every variable settle reads begins with one


@click.group(short_help="Check the settings a service would start with in production.")
def config() -> None:
    """Check the settings a service would start with in production."""


@config.command()
@click.option(
    "--service",
    required=True,
    type=click.Choice([*SERVICES, OPERATOR]),
    help="The service command whose settings to check, or operator for the operators' ones.",
)
@click.option(
    "--env-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Check this file's KEY=VALUE lines alone instead of this process's environment.",
)
@json_option
def check(service: str, env_file: Path | None, as_json: bool) -> None:
    """Print every setting the --service would be refused in production; exit 1 if any."""
    kind: type[Section] = OperatorCommandSettings if service == OPERATOR else SERVICES[service]
    production = {"SETTLE_ENV": Deployment.PRODUCTION.value}
    if env_file is None:
        refused = refusals(production, kind=kind)
    else:
        with only(read_env_file(env_file)):
            refused = refusals(production, kind=kind)
    if as_json:
        found = [{"variable": e.variable, "reason": e.problem} for e in refused]
        click.echo(json.dumps(found, sort_keys=True))
    else:
        for error in refused:
            click.echo(str(error))
        verdict = f"{len(refused)} refused" if refused else "would start"
        click.echo(f"settle config check: {service} {verdict} in production", err=True)
    raise SystemExit(1 if refused else 0)


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of an env file: `KEY=VALUE` lines; blank lines and `#` comments skipped,
    an `export ` prefix and one pair of surrounding quotes dropped. UsageError naming the
    line when one is neither."""
    found: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.removeprefix("export ").partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"{path}:{number}: not a KEY=VALUE line")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        found[name.strip()] = value
    return found


@contextmanager
def only(environ: Mapping[str, str]) -> Iterator[None]:
    """The process's settle variables replaced by `environ`'s while inside, and restored
    after: the file is checked as the whole environment its service would be given."""
    given = {k: v for k, v in environ.items() if k.upper().startswith(PREFIXES)}
    ours = {k: v for k, v in os.environ.items() if k.upper().startswith(PREFIXES)}
    for name in ours:
        del os.environ[name]
    os.environ.update(given)
    try:
        yield
    finally:
        for name in given:
            os.environ.pop(name, None)
        os.environ.update(ours)
