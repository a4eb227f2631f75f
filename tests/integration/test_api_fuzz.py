"""The ledger's tenant API, the inbox's webhook endpoint and the operator API (the
reconciler's) against their own OpenAPI documents: schemathesis generates requests from each
document (ones it allows and ones it forbids) and runs every check it has on the answers of
the real app, served on a free port over a real PostgreSQL database; then its stateful phase
follows the documents' links (a booked settlement read back, the next page of a list, a
webhook redelivered; a settlement under review shown and resolved, a break shown and worked
on, a proposal approved, rejected or withdrawn, an inbox event replayed) through scenarios of
a few calls. The operator API has a seeded database of its own and a served rail simulator
(operator_fuzz_support.py), since what it does changes what the other apps would see.

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
from hypothesis import settings
from hypothesis import strategies as st

from services.adapters.postgres.database import create_pool
from services.apps.ledger import windows
from services.inbox.http import create_app as create_inbox_app
from services.inbox.metrics import create_metrics as create_inbox_metrics
from services.inbox.worker import InboxWorker, RetryPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.http import create_app
from services.ledger.metrics import create_metrics
from services.ledger.reads import SettlementReads
from services.operations.break_http import PATH_ACTIONS
from tests.conftest import unique
from tests.harness import Servers
from tests.integration.fuzz_support import (
    FUZZED,
    STATEFUL,
    WEBHOOK_CONFIG,
    WEBHOOK_MAX_BODY,
    RailSigner,
    ledger_document,
    machine_at,
    served,
    webhook_checks,
    webhook_document,
)
from tests.integration.operator_fuzz_support import (
    OPERATOR,
    OPERATOR_TOKEN,
    RESET,
    AsTheOperator,
    build_operator_api,
    operator_document,
)
from tests.integration.test_ledger_api import ledger_settings

pytestmark = [pytest.mark.integration]

TENANT = unique("fz")  # the ledger's tokens are `token-<tenant>` (test_ledger_api's settings)
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
def inbox_url(database_url: str, kafka_bootstrap: str) -> Iterator[str]:
    """The inbox's webhook app, applying what it stores as the service runs, for the module."""
    settings_ = ledger_settings(database_url, kafka_bootstrap, unique("fx"), unique("fw"))
    metrics = create_inbox_metrics()

    async def build_webhooks(stack: AsyncExitStack) -> Any:
        pool = await create_pool(settings_, keep_sessions=True)
        stack.push_async_callback(pool.close)
        worker = InboxWorker(pool, metrics, RetryPolicy(), rng=random.Random(0))
        return create_inbox_app(
            pool, webhook_checks(), metrics, max_body_bytes=WEBHOOK_MAX_BODY, applier=worker
        )

    with served(build_webhooks) as webhooks:
        yield webhooks


@pytest.fixture(scope="module")
def operator_url(infra: Servers) -> Iterator[str]:
    """The operator API, taking OPERATOR_TOKEN (OPERATOR's), over a seeded database of the
    module's own, for the module."""
    with served(build_operator_api(infra.database_url)) as url:
        yield url


# schemathesis's own list plus 422: the POST's answer to a well-formed request the ledger's state
# refuses (the key already used with another body, as generated keys repeat; the tenant's limits
# or funds), documented, and no schema can tell it from a valid request beforehand.
_ACCEPTS = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]  # schemathesis's own
_POST_ACCEPTS = [*_ACCEPTS, "422"]
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
# The requests name their operator as the token's (`Settle-Operator`), as the `settle`
# commands do; a request naming another is refused, which test_operator_client holds.
_OPERATOR_CONFIG = {
    "auth": {"openapi": {"operatorToken": {"bearer": OPERATOR_TOKEN}}},
    "parameters": {"header.Settle-Operator": OPERATOR},
    "operations": [
        {
            # A minimum above the maximum is refused (400 `invalid_amount_range`), a rule
            # between two parameters no schema of each can say.
            "include-name": "GET /v1/breaks",
            "checks": {"positive_data_acceptance": {"expected-statuses": [*_ACCEPTS, "400"]}},
        }
    ],
}
# Longer scenarios than the others: a list found by random filters links to nothing at times.
OPERATOR_STATEFUL = settings(STATEFUL, stateful_step_count=8)
OPERATOR_DOCUMENT = operator_document()
operator_schema = schemathesis.openapi.from_dict(
    OPERATOR_DOCUMENT, config=schemathesis.Config.from_dict(_OPERATOR_CONFIG)
)


def test_the_apps_serve_the_documents_fuzzed(
    ledger_url: str, inbox_url: str, operator_url: str
) -> None:
    assert requests.get(f"{ledger_url}/openapi.json", timeout=10).json() == LEDGER_DOCUMENT
    assert requests.get(f"{operator_url}/openapi.json", timeout=10).json() == OPERATOR_DOCUMENT
    assert requests.get(f"{inbox_url}/openapi.json", timeout=10).status_code == 404


def test_the_operator_document_has_every_operator_route() -> None:
    paths = OPERATOR_DOCUMENT["paths"]
    operations = {f"{m.upper()} {p}" for p, ops in paths.items() for m in ops}
    for route in (
        "GET /v1/review",
        "GET /v1/review/{id}",
        "POST /v1/review/{id}/resolve",
        "GET /v1/breaks",
        "GET /v1/breaks/export",
        "GET /v1/breaks/{id}",
        *(f"POST /v1/breaks/{{id}}/{action}" for action in PATH_ACTIONS),
        "GET /v1/approvals",
        *(f"POST /v1/approvals/{{id}}/{move}" for move in ("approve", "reject", "withdraw")),
        "GET /v1/policy",
        "POST /v1/policy/two-person",
        "GET /v1/inbox",
        "POST /v1/inbox/{event}/replay",
    ):
        assert route in operations, route
        method, _, path = route.partition(" ")
        operation = paths[path][method.lower()]
        assert operation["security"] == [{"operatorToken": []}], route
        assert "Settle-Operator" in [p["name"] for p in operation["parameters"]], route
        for status in ("401", "403", "503"):
            error = operation["responses"][status]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/ErrorResponse"}, (route, status)


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
def test_webhook_endpoint_keeps_its_openapi_contract(case: Any, inbox_url: str) -> None:
    with RailSigner() as rail:
        case.call_and_validate(base_url=inbox_url, session=rail)


@operator_schema.parametrize()
@FUZZED
def test_operator_api_keeps_its_openapi_contract(case: Any, operator_url: str) -> None:
    case.call_and_validate(base_url=operator_url)


def test_ledger_api_keeps_its_contract_along_its_links(ledger_url: str) -> None:
    machine_at(ledger_schema, ledger_url).run(settings=STATEFUL)


def test_webhook_endpoint_keeps_its_contract_along_its_links(inbox_url: str) -> None:
    with RailSigner() as rail:
        machine_at(webhook_schema, inbox_url, rail).run(settings=STATEFUL)


def test_operator_api_keeps_its_contract_along_its_links(operator_url: str) -> None:
    with AsTheOperator() as session:
        base: Any = machine_at(operator_schema, operator_url, session)

        class FromTheSeed(base):  # type: ignore[misc]
            def setup(self) -> None:
                # Each scenario on a fresh copy of the seeded database: the same requests
                # are answered the same when Hypothesis replays them.
                session.post(f"{operator_url}{RESET}", timeout=30).raise_for_status()

        FromTheSeed.run(settings=OPERATOR_STATEFUL)
