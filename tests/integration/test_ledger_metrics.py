"""What an operator's Prometheus scrapes from the ledger's admin app after the idempotency
layer's three answers to a key used again: a replay, a reused key (422) and a claim conflict
with a request in flight elsewhere (409 after the bounded wait). Real PostgreSQL; the app
built as `services/apps/ledger.py` builds it, the tenant label from the configured tenants."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import unique
from tests.integration.test_ledger_api import (
    Api,
    key_held_elsewhere,
    ledger_settings,
    running_ledger,
    scrape,
    settlement,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def api(database_url: str, kafka_bootstrap: str) -> AsyncIterator[Api]:
    settings = ledger_settings(database_url, kafka_bootstrap, unique("ta"), unique("tb"))
    async with running_ledger(settings) as running:
        yield running


async def test_admin_metrics_show_a_replay_a_reused_key_and_a_claim_conflict(api: Api) -> None:
    key, body = unique("key-"), settlement()
    assert (await api.post(api.a, key, body)).status_code == 201
    assert (await api.post(api.a, key, body)).headers["idempotent-replayed"] == "true"
    reused = await api.post(api.a, key, settlement(amount=9_999))
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    held = unique("key-")
    async with key_held_elsewhere(api.pool, api.b, held):
        in_use = await api.post(api.b, held, settlement())
    assert in_use.json()["error"]["code"] == "idempotency_key_in_use"

    response = await api.admin.get("/metrics")
    assert response.status_code == 200
    samples = scrape(response.text)

    def requests(outcome: str, tenant: str) -> float:
        return samples[("settle_ledger_requests_total", (("outcome", outcome), ("tenant", tenant)))]

    a, b = api.a, api.b
    assert (requests("created", a), requests("replayed", a), requests("mismatch", a)) == (1, 1, 1)
    assert requests("in_use", b) == 1 and requests("created", b) == 0
    assert samples[("settle_ledger_fingerprint_mismatches_total", (("tenant", a),))] == 1
    assert samples[("settle_ledger_fingerprint_mismatches_total", (("tenant", b),))] == 0
    assert samples[("settle_ledger_claim_conflicts_total", (("tenant", b),))] == 1
    assert samples[("settle_ledger_claim_conflicts_total", (("tenant", a),))] == 0
    # The conflicting request waited out the lock bound (2 s) on the key held elsewhere.
    assert samples[("settle_ledger_inflight_wait_seconds_count", ())] == 1
    assert samples[("settle_ledger_inflight_wait_seconds_bucket", (("le", "1.5"),))] == 0
    assert samples[("settle_ledger_inflight_wait_seconds_bucket", (("le", "+Inf"),))] == 1
    assert 2.0 <= samples[("settle_ledger_inflight_wait_seconds_sum", ())] < 10.0
    # Nothing failed closed; only the configured tenants (and `unknown`) have series.
    for reason in ("postgresql", "backlog"):
        assert samples[("settle_ledger_fail_closed_total", (("reason", reason),))] == 0
    tenants = {dict(labels)["tenant"] for _, labels in samples if "tenant" in dict(labels)}
    assert tenants == {a, b, "unknown"}
