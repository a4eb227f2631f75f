"""The ledger's tenant API and the operator API (the inbox's admin port) against their own
OpenAPI documents: schemathesis generates requests from each /openapi.json (ones the document
allows and ones it forbids) and runs every check it has on the answers of the real app, served
on a free port over a real PostgreSQL database. The inbox's webhook port publishes no document
(the rail sends Stripe's events), so it is not here.

Each document is taken from the app object when the module loads, so `schema.parametrize()` has
its operations at collection (schemathesis's `pytest.from_fixture` reads a node attribute pytest
9 no longer has); a test checks the served /openapi.json is the same. The app runs in a thread
with its own event loop, its pool's, so the generated tests stay plain synchronous ones.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from typing import Any

import pytest
import requests
import schemathesis
import uvicorn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from services.adapters.postgres.database import create_pool
from services.apps.inbox import create_admin_app as create_inbox_admin_app
from services.apps.ledger import windows
from services.inbox.metrics import create_metrics as create_inbox_metrics
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.http import create_app
from services.ledger.metrics import create_metrics
from services.ledger.reads import SettlementReads
from services.platform.edge import BearerAuth
from tests.conftest import unique
from tests.integration.test_ledger_api import ledger_settings

pytestmark = [pytest.mark.integration]

# Per operation and phase: enough to find a contract gap in seconds, few enough that the whole
# run stays well under a minute.
MAX_EXAMPLES = 25
TENANT = unique("fz")  # the ledger's tokens are `token-<tenant>` (test_ledger_api's settings)
OPERATOR_TOKEN = f"token-{unique('op')}"
_EPOCH_MICROS_MAX = 2**53  # far below year 9999, where a settlement cursor's time would end


def _unpadded(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).rstrip(b"=").decode()


# Only the API knows which cursors are positions; these are the shapes it issues (the settlement
# list's `<microseconds>/<id>`, the entry list's posting id), so a generated one is a real page.
schemathesis.openapi.format(
    "settlements-cursor",
    st.builds(lambda m, i: _unpadded(f"{m}/{i}"), st.integers(0, _EPOCH_MICROS_MAX), st.uuids()),
)
schemathesis.openapi.format("entries-cursor", st.integers(1, 2**63 - 1).map(str).map(_unpadded))


@contextmanager
def _served(build: Callable[[AsyncExitStack], Awaitable[Any]]) -> Iterator[str]:
    """The app `build` makes (its resources on the stack) served on a free local port from a
    thread of its own, for the duration; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(None, log_level="warning", lifespan="off"))

    async def serve() -> None:
        async with AsyncExitStack() as stack:
            server.config.app = await build(stack)
            await server.serve(sockets=[sock])

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the app did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def ledger_url(database_url: str, kafka_bootstrap: str) -> Iterator[str]:
    """The ledger's tenant app, for the module; TENANT's token is `token-<TENANT>`."""
    settings_ = ledger_settings(database_url, kafka_bootstrap, TENANT, unique("fy"))

    async def build(stack: AsyncExitStack) -> Any:
        pool = await create_pool(settings_, keep_sessions=True)
        stack.push_async_callback(pool.close)
        books = Books(windows(settings_), settings_.stripe_method, limits=settings_.tenant_limits)
        ledger = Ledger(pool, books, metrics=create_metrics(tenants=settings_.api_tokens))
        stack.push_async_callback(ledger.stop)
        return create_app(ledger, SettlementReads(pool), settings_)

    with _served(build) as url:
        yield url


@pytest.fixture(scope="module")
def operator_url(database_url: str, kafka_bootstrap: str) -> Iterator[str]:
    """The inbox's admin app (the operator API), for the module, taking OPERATOR_TOKEN."""
    settings_ = ledger_settings(database_url, kafka_bootstrap, unique("fx"), unique("fw"))

    async def build(stack: AsyncExitStack) -> Any:
        pool = await create_pool(settings_, keep_sessions=True)
        stack.push_async_callback(pool.close)
        operators = BearerAuth({OPERATOR_TOKEN: "ops-fuzz"})
        return create_inbox_admin_app(pool, operators, create_inbox_metrics())

    with _served(build) as url:
        yield url


def _ledger_document() -> dict[str, Any]:
    # Nothing connects while the app is built; the settings only have to load.
    offline = ledger_settings("postgresql://settle@127.0.0.1:1/x", "127.0.0.1:1", "a", "b")
    return create_app(None, None, offline).api.openapi()  # type: ignore[arg-type]


# schemathesis's own list plus 422: the POST's answer to a well-formed request the ledger's state
# refuses (the key already used with another body, as generated keys repeat; the tenant's limits
# or funds), documented, and no schema can tell it from a valid request beforehand.
_POST_ACCEPTS = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
_CONFIG = {
    # As the document's security scheme, so requests generated without it stay without it.
    "auth": {"openapi": {"tenantToken": {"bearer": f"token-{TENANT}"}}},
    "operations": [
        {
            "include-name": "POST /v1/settlements",
            "checks": {
                "positive_data_acceptance": {"expected-statuses": _POST_ACCEPTS},
            },
        }
    ],
}
LEDGER_DOCUMENT = _ledger_document()
ledger_schema = schemathesis.openapi.from_dict(
    LEDGER_DOCUMENT, config=schemathesis.Config.from_dict(_CONFIG)
)
OPERATOR_DOCUMENT = create_inbox_admin_app(
    None,  # type: ignore[arg-type]
    BearerAuth({}),
    create_inbox_metrics(),
).openapi()
operator_schema = schemathesis.openapi.from_dict(
    OPERATOR_DOCUMENT,
    config=schemathesis.Config.from_dict(
        {"auth": {"openapi": {"tenantToken": {"bearer": OPERATOR_TOKEN}}}}
    ),
)
# The same examples every run, so a red run is a finding to reproduce rather than luck; the
# health checks time generation, which the HTTP round trips dominate here.
fuzzed = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def test_ledger_and_operator_apis_serve_the_documents_fuzzed(
    ledger_url: str, operator_url: str
) -> None:
    assert requests.get(f"{ledger_url}/openapi.json", timeout=10).json() == LEDGER_DOCUMENT
    assert requests.get(f"{operator_url}/openapi.json", timeout=10).json() == OPERATOR_DOCUMENT


# No `checks=` below: every check schemathesis has is on unless configured off, as with
# `--checks all`.
@ledger_schema.parametrize()
@fuzzed
def test_ledger_api_keeps_its_openapi_contract(case: Any, ledger_url: str) -> None:
    case.call_and_validate(base_url=ledger_url)


@operator_schema.parametrize()
@fuzzed
def test_operator_api_keeps_its_openapi_contract(case: Any, operator_url: str) -> None:
    case.call_and_validate(base_url=operator_url)
