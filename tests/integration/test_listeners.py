"""The ledger and the inbox each listen on two ports, run by their own composition roots
(`app.serve`) on real sockets over the real PostgreSQL and Kafka: the public port serves only
what its caller needs (the tenant API; the webhook endpoint) and /healthz, the admin port the
operator endpoints, readiness, /metrics, /docs and /openapi.json. An admin path asked for on
the public port is 404, whatever the credentials: its existence is not disclosed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from railsim.webhooks import signature_header
from services.apps.inbox import serve as serve_inbox
from services.apps.ledger import serve as serve_ledger
from services.platform.service_settings import Settings
from services.platform.settings import load_settings
from tests.conftest import scratch_database, unique
from tests.harness import Servers
from tests.integration.inbox_support import rail_event
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"
TENANT_TOKEN, OPERATOR_TOKEN, SECRET = "tenant-token-l", "operator-token-l", "whsec_listeners"
Serve = Callable[[Settings, str, int, int], Coroutine[Any, Any, None]]


@pytest.fixture(scope="module")
async def settings(infra: Servers) -> AsyncIterator[Settings]:
    """A database of this module's own: the inbox's workers claim only its events."""
    async with scratch_database(infra.database_url, "settle_listeners_") as url:
        yield load_settings(
            {
                "SETTLE_DATABASE_URL": url,
                "SETTLE_KAFKA_BOOTSTRAP": infra.kafka_bootstrap,
                "SETTLE_API_TOKENS": f"{unique('t')}:{TENANT_TOKEN}",
                "SETTLE_OPERATOR_TOKENS": f"alice:{OPERATOR_TOKEN}",
                "STRIPE_WEBHOOK_SECRET": SECRET,
            }
        )


class Ports:
    """Clients of a running service's two ports."""

    def __init__(self, public: httpx.AsyncClient, admin: httpx.AsyncClient) -> None:
        self.public, self.admin = public, admin

    async def assert_closed(self) -> None:
        """Neither port takes a connection any more."""
        for client in (self.public, self.admin):
            with pytest.raises(httpx.ConnectError):
                await client.get("/healthz")


@asynccontextmanager
async def running(serve: Serve, settings: Settings) -> AsyncIterator[Ports]:
    """The service `serve` runs, on two free ports, until the block ends."""
    port = free_ports(2)
    task = asyncio.create_task(serve(settings, HOST, port, port + 1))
    async with (
        httpx.AsyncClient(base_url=f"http://{HOST}:{port}") as public,
        httpx.AsyncClient(base_url=f"http://{HOST}:{port + 1}") as admin,
    ):
        try:
            for _ in range(200):
                assert not task.done(), task
                try:
                    await public.get("/healthz")
                    await admin.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            yield Ports(public, admin)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # Stopped, the service leaves no listener open behind it.
        await Ports(public, admin).assert_closed()


def ledger(settings: Settings, host: str, port: int, admin_port: int) -> Coroutine[Any, Any, None]:
    return serve_ledger(settings, host, port, admin_port, consume=False)


TENANT = {"Authorization": f"Bearer {TENANT_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
# Asked for on the public port with no token, a tenant's and an operator's: 404 every time.
CREDENTIALS: list[dict[str, str]] = [{}, TENANT, OPERATOR]


async def assert_not_there(client: httpx.AsyncClient, method: str, path: str) -> None:
    for headers in CREDENTIALS:
        response = await client.request(method, path, headers=headers)
        assert response.status_code == 404, (method, path, headers, response.text)
        assert response.json()["error"]["code"] == "not_found"


def settlement_body() -> dict[str, object]:
    return {
        "reference": unique("r"),
        "payee": "p",
        "destination": "acct_1",
        "amount": 500,
        "currency": "USD",
    }


async def test_the_ledgers_public_port_serves_the_tenant_api_and_nothing_of_the_admins(
    settings: Settings,
) -> None:
    tenant = next(iter(settings.api_tokens))
    async with running(ledger, settings) as ports:
        public, admin = ports.public, ports.admin
        key = {**TENANT, "Idempotency-Key": unique("k")}
        created = await public.post("/v1/settlements", json=settlement_body(), headers=key)
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        tenant_paths = [
            "/v1/settlements",
            f"/v1/settlements/{sid}",
            f"/v1/accounts/{tenant}:funding:USD/balance",
            f"/v1/accounts/{tenant}:funding:USD/entries",
        ]
        for path in tenant_paths:
            assert (await public.get(path, headers=TENANT)).status_code == 200, path
        assert (await public.get("/healthz")).json() == {"status": "ok"}
        document = (await public.get("/openapi.json")).json()
        assert "/v1/settlements" in document["paths"]
        assert not {"/readyz", "/metrics"} & set(document["paths"])
        for path in ("/readyz", "/metrics", "/docs", "/docs/oauth2-redirect"):
            await assert_not_there(public, "GET", path)

        ready = await admin.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"kafka": True, "postgres": True})
        metrics = await admin.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        created = f'settle_ledger_requests_total{{outcome="created",tenant="{tenant}"}} 1.0'
        assert created in metrics.text
        assert (await admin.get("/docs")).headers["content-type"].startswith("text/html")
        assert {"/readyz", "/metrics"} <= set((await admin.get("/openapi.json")).json()["paths"])
        assert (await admin.get("/healthz")).json() == {"status": "ok"}
        await assert_not_there(admin, "POST", "/v1/settlements")
        for path in tenant_paths:
            await assert_not_there(admin, "GET", path)


async def test_the_inboxs_public_port_serves_the_webhook_endpoint_and_nothing_else(
    settings: Settings,
) -> None:
    body = rail_event("transfer.created", f"tr_{uuid.uuid4().hex}", None)
    signed = {"Stripe-Signature": signature_header(body, SECRET, int(time.time()))}
    async with running(serve_inbox, settings) as ports:
        public, admin = ports.public, ports.admin
        taken = await public.post("/v1/webhooks/stripe", content=body, headers=signed)
        assert (taken.status_code, taken.json()["duplicate"]) == (200, False)
        assert (await public.get("/healthz")).json() == {"status": "ok"}
        for path in ("/v1/inbox?status=dead", "/readyz", "/metrics", "/docs", "/openapi.json"):
            await assert_not_there(public, "GET", path)
        await assert_not_there(public, "POST", "/v1/inbox/evt_1/replay")

        # The inbox's events are the operator API's (the reconciler's), not the inbox's.
        await assert_not_there(admin, "GET", "/v1/inbox?status=dead")
        await assert_not_there(admin, "POST", "/v1/inbox/evt_1/replay")
        ready = await admin.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"postgres": True})
        metrics = await admin.get("/metrics")
        assert 'settle_inbox_received_total{outcome="stored"} 1.0' in metrics.text
        assert (await admin.get("/docs")).status_code == 200
        assert "/v1/inbox" not in (await admin.get("/openapi.json")).json()["paths"]
        assert (await admin.get("/healthz")).json() == {"status": "ok"}
        again = await admin.post("/v1/webhooks/stripe", content=body, headers=signed)
        assert again.status_code == 404
