"""The services as an operator starts them: production mode with a missing secret stops
`settle ledger` naming the variable, so do the local secrets on every address without
SETTLE_ENV, and a service that did start logs none of its secrets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from services.platform.service_settings import Settings
from tests.waiting import eventually_blocking
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
SETTLE = str(Path(sys.executable).with_name("settle"))
SECRETS = {
    "STRIPE_API_KEY": "sk_test_4f0c1e9a7b3d25e8",
    "STRIPE_WEBHOOK_SECRET": "whsec_9d2b7e4a1c6f3085",
    "SETTLE_API_TOKENS": "acme:acme-tok-51c8e07b2d9a",
    "SETTLE_OPERATOR_TOKENS": "ops:ops-tok-3a6d9f1e8c20",
    "SETTLE_KAFKA_SASL_PASSWORD": "kafka-pw-7e2c4b9d0a13",
}
SHOWN = [value.partition(":")[2] or value for value in SECRETS.values()]


def _environment(**given: str) -> dict[str, str]:
    aliases = {f.alias for f in Settings.model_fields.values() if f.alias}
    return {**{k: v for k, v in os.environ.items() if k not in aliases}, **given}


def test_settle_ledger_in_production_without_a_secret_exits_naming_it() -> None:
    env = _environment(SETTLE_ENV="production", **{**SECRETS, "SETTLE_API_TOKENS": ""})
    del env["SETTLE_API_TOKENS"]
    done = subprocess.run(
        [SETTLE, "ledger"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "SETTLE_API_TOKENS: is unset" in done.stderr


def test_settle_ledger_beyond_loopback_on_the_local_secrets_exits_naming_them() -> None:
    # No SETTLE_ENV at all: the local default secrets must not be served on every address.
    done = subprocess.run(
        [SETTLE, "ledger", "--host", "0.0.0.0", "--no-kafka"],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "SETTLE_API_TOKENS: holds the local default" in done.stderr


def _serve_until_healthy(args: list[str], port: int, env: dict[str, str]) -> str:
    """Start `settle *args`, wait for /healthz, stop it with SIGTERM; everything it printed."""
    with subprocess.Popen(
        [SETTLE, *args, "--port", str(port)],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as service:
        try:

            def healthy() -> bool:
                assert service.poll() is None, f"settle {args[0]} exited"
                try:
                    return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
                except httpx.TransportError:
                    return False

            eventually_blocking(healthy, 60, f"settle {args[0]} healthy")
            # A refused bearer token is logged at most as a refusal, never with the known ones.
            httpx.get(f"http://127.0.0.1:{port}/v1/settlements", headers={"Authorization": "x"})
        finally:
            service.send_signal(signal.SIGTERM)
        output, _ = service.communicate(timeout=60)
    return output


@pytest.mark.timeout(240)
@pytest.mark.parametrize("args", [["ledger", "--no-kafka"], ["inbox"]], ids=lambda a: a[0])
def test_a_started_service_logs_none_of_its_secrets(database_url: str, args: list[str]) -> None:
    # The Kafka login is read and checked at start even where no broker is dialled.
    kafka = {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SETTLE_KAFKA_SASL_USERNAME": "u"}
    env = _environment(SETTLE_DATABASE_URL=database_url, **SECRETS, **kafka)
    output = _serve_until_healthy(args, free_ports(1, set()), env)
    assert "listening on" in output
    assert [secret for secret in SHOWN if secret in output] == []
