"""`settle infra up | down | status | env`: local PostgreSQL and Kafka without Docker."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click

from services.domain.errors import ConfigError, InfrastructureError
from tools.infra import stack
from tools.infra.model import Outcome, State


def _progress(line: str) -> None:
    click.echo(f"  .. {line}", err=True)


@click.group()
def infra() -> None:
    """Local PostgreSQL and Kafka, run as plain processes under .run/."""


KAFKA_SECURITY = click.option(
    "--kafka-security",
    type=click.Choice(["plaintext", "sasl_ssl"]),
    default="plaintext",
    show_default=True,
    help="sasl_ssl: the local broker also listens for TLS + SCRAM-SHA-512 clients on the port "
    "after its controller's (`settle infra env --kafka-security sasl_ssl` prints the settings).",
)


@infra.command()
@click.option("-q", "--quiet", is_flag=True, help="Print only the summary.")
@KAFKA_SECURITY
def up(quiet: bool, kafka_security: str) -> None:
    """Start PostgreSQL and Kafka unless running or external; create the topics."""
    try:
        report = stack.up(
            progress=None if quiet else _progress, kafka_sasl_ssl=kafka_security == "sasl_ssl"
        )
    except (InfrastructureError, ConfigError) as e:
        raise click.ClickException(str(e)) from e
    for component in report.components:
        pid = f"pid {component.pid}" if component.pid else ""
        note = (
            " (using the external server; not started here)"
            if component.outcome is Outcome.EXTERNAL
            else ""
        )
        click.echo(f"{component.name:<9} {component.outcome:<16} {pid:<11} {component.url}{note}")
    if report.topics_created:
        click.echo(f"topics created: {', '.join(report.topics_created)}")
    if not report.started and all(c.outcome is Outcome.ALREADY_RUNNING for c in report.components):
        click.echo("both were already running; nothing to do")
    if kafka_security == "sasl_ssl" and report.kafka.outcome is not Outcome.EXTERNAL:
        click.echo('clients over SASL_SSL: eval "$(settle infra env --kafka-security sasl_ssl)"')
    click.echo(f"infra up in {report.seconds:.1f} s")


@infra.command()
@click.option("--purge", is_flag=True, help="Also delete the PostgreSQL and Kafka data.")
def down(purge: bool) -> None:
    """Stop the servers `up` started; data stays unless --purge."""
    try:
        stack.down(purge=purge, progress=click.echo)
    except InfrastructureError as e:
        raise click.ClickException(str(e)) from e


@infra.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def status(as_json: bool) -> None:
    """Tell what runs: component, state, pid, address, URL."""
    components = stack.status()
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(c) for c in components], indent=2))
        return
    click.echo(f"{'component':<10} {'state':<9} {'pid':<8} {'address':<16} url")
    for c in components:
        line = f"{c.name:<10} {c.state:<9} {c.pid or '-'!s:<8} {c.address or '-':<16} {c.url}"
        click.echo(line + (f"  ({c.detail})" if c.detail else ""))


@infra.command("kafka-tls")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", "names", multiple=True, required=True, help="A broker host name or IP.")
def kafka_tls(directory: Path, names: tuple[str, ...]) -> None:
    """Make a CA (ca.pem) and a broker key and certificate for NAMEs (broker.pem, PEM keystore)
    in DIRECTORY, as `up --kafka-security sasl_ssl` does for the local broker."""
    from tools.infra.kafka_secure import ca_file, ensure_certificates, keystore_file

    try:
        ensure_certificates(directory, names)
    except InfrastructureError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"{ca_file(directory)}\n{keystore_file(directory)}")


@infra.command()
@KAFKA_SECURITY
def env(kafka_security: str) -> None:
    """Print `export SETTLE_DATABASE_URL=... SETTLE_KAFKA_BOOTSTRAP=...` for a shell to eval."""
    down_now = [c.name for c in stack.status() if c.state is State.DOWN]
    if down_now:
        click.echo(f"# warning: not running: {', '.join(down_now)} (settle infra up)", err=True)
    try:
        click.echo(stack.env_lines(kafka_sasl_ssl=kafka_security == "sasl_ssl"))
    except InfrastructureError as e:
        raise click.ClickException(str(e)) from e
