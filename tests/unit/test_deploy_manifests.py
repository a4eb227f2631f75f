"""The production manifests in deploy/ parse, and every settle command they run exists with
the options they pass, so a renamed flag cannot silently break a deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from services.shared.config import load_settings
from tools.cli import cli

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
# The Secret deploy/k8s/README.md creates, in the shape of a real deployment's values: with
# SETTLE_RAIL=stripe the services refuse to start without it (shared.production).
SECRET = {
    "SETTLE_DATABASE_URL": "postgresql+asyncpg://settle_app:pw@db:5432/settle?sslmode=verify-full",
    "STRIPE_API_KEY": "sk_live_0123456789abcdefghij",
    "STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdefghij",
    "SETTLE_API_TOKENS": "acme:0123456789abcdefghij",
    "SETTLE_OPERATOR_TOKENS": "ops:jihgfedcba9876543210",
}


def _container_args(doc: dict[str, Any]) -> list[list[str]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return [c["args"] for c in pod.get("containers", []) if c.get("image", "").startswith("settle")]


def _commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            found += [(path.name, args) for args in _container_args(doc)]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if "command" in service and service.get("image", "").startswith("settle"):
            found.append((f"compose:{name}", service["command"]))
    return found


def test_every_settle_service_is_deployed() -> None:
    deployed = {args[0] for _, args in _commands()}
    assert {"migrate", "ledger", "relay", "inbox", "reconciler"} <= deployed


@pytest.mark.parametrize(("where", "args"), _commands(), ids=lambda v: str(v))
def test_deployed_commands_parse(where: str, args: list[str]) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, args[0])
    assert command is not None, f"{where}: no command {args[0]!r}"
    command.make_context(args[0], list(args[1:]), parent=ctx)  # raises on unknown options


def test_the_config_map_is_a_valid_configuration() -> None:
    (config,) = yaml.safe_load_all((DEPLOY / "k8s" / "config.yaml").read_text())
    # Raises ConfigError naming the variable, e.g. a key retention shorter than its windows.
    settings = load_settings({**{k: str(v) for k, v in config["data"].items()}, **SECRET})
    assert settings.idempotency_retention_hours == 48
