"""The ledger's tenant API, the inbox's webhook endpoint and the operator API (the inbox's
admin port) against their own OpenAPI documents: schemathesis generates requests from each
document (ones it allows and ones it forbids) and runs every check it has on the answers of
the real app, served on a free port over a real PostgreSQL database; then its stateful phase
follows the documents' links (a booked settlement read back, the next page of a list, a
webhook redelivered) through scenarios of a few calls.

Each document is taken from the app object when the module loads, so `schema.parametrize()` has
its operations at collection (schemathesis's `pytest.from_fixture` reads a node attribute pytest
9 no longer has); a test checks the served /openapi.json is the same. The webhook port serves
none (the rail reads none), so its document is the app's `.api.openapi()`. Webhooks go out
through `RailSigner`, which signs each body as the rail does, so a generated event reaches the
inbox's parsing and storing instead of stopping at the signature check.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import strategies as st

from services.adapters.postgres.database import create_pool
from services.apps.inbox import create_admin_app as create_inbox_admin_app
from services.apps.ledger import windows
from services.inbox.http import create_app as create_inbox_app
from services.inbox.metrics import create_metrics as create_inbox_metrics
from services.inbox.worker import InboxWorker, RetryPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.http import create_app
from services.ledger.metrics import create_metrics
from services.ledger.reads import SettlementReads
from services.platform.bearer import BearerAuth
from tests.conftest import unique
from tests.integration.fuzz_support import (
    FUZZED,
    STATEFUL,
    WEBHOOK_CONFIG,
    WEBHOOK_MAX_BODY,
    RailSigner,
    ledger_document,
    machine_at,
    operator_document,
    served,
    webhook_checks,
    webhook_document,
)
from tests.integration.test_ledger_api import ledger_settings

pytestmark = [pytest.mark.integration]

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

    with served(build) as url:
        yield url


@pytest.fixture(scope="module")
def inbox_urls(database_url: str, kafka_bootstrap: str) -> Iterator[tuple[str, str]]:
    """The inbox's webhook app (applying what it stores, as the service runs) and its admin
    app (the operator API, taking OPERATOR_TOKEN) over one pool, for the module."""
    settings_ = ledger_settings(database_url, kafka_bootstrap, unique("fx"), unique("fw"))
    metrics = create_inbox_metrics()

    async def build_webhooks(stack: AsyncExitStack) -> Any:
        pool = await create_pool(settings_, keep_sessions=True)
        stack.push_async_callback(pool.close)
        worker = InboxWorker(pool, metrics, RetryPolicy(), rng=random.Random(0))
        return create_inbox_app(
            pool, webhook_checks(), metrics, max_body_bytes=WEBHOOK_MAX_BODY, applier=worker
        )

    async def build_admin(stack: AsyncExitStack) -> Any:
        pool = await create_pool(settings_, keep_sessions=True)
        stack.push_async_callback(pool.close)
        return create_inbox_admin_app(pool, BearerAuth({OPERATOR_TOKEN: "ops-fuzz"}), metrics)

    with served(build_webhooks) as webhooks, served(build_admin) as admin:
        yield webhooks, admin


# schemathesis's own list plus 422: the POST's answer to a well-formed request the ledger's state
# refuses (the key already used with another body, as generated keys repeat; the tenant's limits
# or funds), documented, and no schema can tell it from a valid request beforehand.
_POST_ACCEPTS = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]
_LEDGER_CONFIG = {
    # As the document's security scheme, so requests generated without it stay without it.
    "auth": {"openapi": {"tenantToken": {"bearer": f"token-{TENANT}"}}},
    "operations": [
        {
            "include-name": "POST /v1/settlements",
            "checks": {"positive_data_acceptance": {"expected-statuses": _POST_ACCEPTS}},
        }
    ],
}
LEDGER_DOCUMENT = ledger_document()
ledger_schema = schemathesis.openapi.from_dict(
    LEDGER_DOCUMENT, config=schemathesis.Config.from_dict(_LEDGER_CONFIG)
)
WEBHOOK_DOCUMENT = webhook_document()
webhook_schema = schemathesis.openapi.from_dict(
    WEBHOOK_DOCUMENT, config=schemathesis.Config.from_dict(WEBHOOK_CONFIG)
)
OPERATOR_DOCUMENT = operator_document()
operator_schema = schemathesis.openapi.from_dict(
    OPERATOR_DOCUMENT,
    config=schemathesis.Config.from_dict(
        {"auth": {"openapi": {"tenantToken": {"bearer": OPERATOR_TOKEN}}}}
    ),
)


def test_the_apps_serve_the_documents_fuzzed(ledger_url: str, inbox_urls: tuple[str, str]) -> None:
    webhooks, admin = inbox_urls
    assert requests.get(f"{ledger_url}/openapi.json", timeout=10).json() == LEDGER_DOCUMENT
    assert requests.get(f"{admin}/openapi.json", timeout=10).json() == OPERATOR_DOCUMENT
    assert requests.get(f"{webhooks}/openapi.json", timeout=10).status_code == 404


def test_no_document_offers_fastapis_own_validation_error() -> None:
    # Bad input is answered 400 in the error shape (edge.install_error_handlers), never 422
    # with FastAPI's `detail` list; a document that said so would be wrong.
    for document in (LEDGER_DOCUMENT, WEBHOOK_DOCUMENT, OPERATOR_DOCUMENT):
        assert "HTTPValidationError" not in str(document)


# No `checks=` below: every check schemathesis has is on unless configured off, as with
# `--checks all`.
@ledger_schema.parametrize()
@FUZZED
def test_ledger_api_keeps_its_openapi_contract(case: Any, ledger_url: str) -> None:
    case.call_and_validate(base_url=ledger_url)


@webhook_schema.parametrize()
@FUZZED
def test_webhook_endpoint_keeps_its_openapi_contract(
    case: Any, inbox_urls: tuple[str, str]
) -> None:
    with RailSigner() as rail:
        case.call_and_validate(base_url=inbox_urls[0], session=rail)


@operator_schema.parametrize()
@FUZZED
def test_operator_api_keeps_its_openapi_contract(case: Any, inbox_urls: tuple[str, str]) -> None:
    case.call_and_validate(base_url=inbox_urls[1])


def test_ledger_api_keeps_its_contract_along_its_links(ledger_url: str) -> None:
    machine_at(ledger_schema, ledger_url).run(settings=STATEFUL)


def test_webhook_endpoint_keeps_its_contract_along_its_links(
    inbox_urls: tuple[str, str],
) -> None:
    with RailSigner() as rail:
        machine_at(webhook_schema, inbox_urls[0], rail).run(settings=STATEFUL)


def test_operator_api_keeps_its_contract_along_its_links(inbox_urls: tuple[str, str]) -> None:
    machine_at(operator_schema, inbox_urls[1]).run(settings=STATEFUL)
