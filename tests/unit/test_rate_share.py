"""Rates held across replicas: each of N live ledger replicas takes 1/N of a tenant's rate,
and the tenant's reads take from a read bucket of their own (429 `rate_limited` on GET)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.tenant_limits import (
    DEFAULT_READ_RATE,
    Rate,
    TenantLimits,
    TenantPolicy,
    parse_tenant_limits,
)
from services.ledger.admission import Admission
from services.ledger.errors import RateLimited
from services.ledger.http import create_app
from services.ledger.replicas import ReplicaRegistry
from services.platform.settings import load_settings
from tests.unit.test_admission import Clock
from tests.unit.test_ledger_http import FakeAcceptor, FakeReads


def test_one_replica_takes_the_whole_rate_and_n_replicas_a_share_each() -> None:
    rate = Rate(per_second=50.0, burst=100)
    assert rate.shared_by(1) is rate
    assert rate.shared_by(2) == Rate(25.0, 50)
    third = rate.shared_by(3)
    assert (third.per_second, third.burst) == (pytest.approx(50 / 3), 33)
    # More replicas than burst tokens: each may still serve one request at once.
    assert Rate(1.0, 2).shared_by(5) == Rate(0.2, 1)
    with pytest.raises(ValueError, match="replicas"):
        rate.shared_by(0)


@given(
    per_second=st.floats(min_value=0.001, max_value=1e6),
    burst=st.integers(min_value=1, max_value=10**6),
    replicas=st.integers(min_value=1, max_value=1000),
)
def test_the_shares_of_all_replicas_add_up_to_the_rate(
    per_second: float, burst: int, replicas: int
) -> None:
    share = Rate(per_second, burst).shared_by(replicas)
    assert share.per_second * replicas == pytest.approx(per_second)
    assert share.burst >= 1
    # Together they hold no more than the burst (or one each, when there are more of them).
    assert share.burst * replicas <= max(burst, replicas)


def limits(**policy: Any) -> TenantLimits:
    return TenantLimits({"acme": TenantPolicy(**policy)})


def spend(admission: Admission, take: str = "throttle") -> int:
    """How many requests `admission` lets through at once before the first 429."""
    for served in range(10_000):
        try:
            getattr(admission, take)("acme")
        except RateLimited:
            return served
    raise AssertionError("never rate limited")


def test_a_share_applies_to_the_buckets_there_and_to_those_made_later() -> None:
    clock = Clock()
    shared, later = (
        Admission(limits(rate=Rate(2.0, 10)), clock=clock),
        Admission(limits(rate=Rate(2.0, 10)), clock=clock),
    )
    shared.throttle("acme")  # its bucket exists before the share is known
    shared.share_among(2)
    later.share_among(2)
    assert shared.replicas == later.replicas == 2
    assert spend(shared) == 5  # the 9 tokens it held are cut to the share's burst
    assert spend(later) == 5
    clock.now += 1.0  # refilled at 1 a second, the share of 2
    assert spend(later) == 1
    # A replica gone: the next heartbeat gives the whole rate back, refilled from then on.
    later.share_among(1)
    clock.now += 10.0
    assert spend(later) == 10


def test_a_count_below_one_still_counts_this_replica() -> None:
    admission = Admission(limits(rate=Rate(1.0, 4)))
    admission.share_among(0)
    assert admission.replicas == 1
    assert spend(admission) == 4


def test_reads_take_from_a_bucket_of_their_own_and_are_shared_too() -> None:
    clock = Clock()
    admission = Admission(limits(rate=Rate(1.0, 2), read_rate=Rate(1.0, 6)), clock=clock)
    assert spend(admission) == 2
    assert spend(admission, "throttle_read") == 6  # writes spent take nothing of the reads
    with pytest.raises(RateLimited) as caught:
        admission.throttle_read("acme")
    assert (caught.value.status, caught.value.code, caught.value.retry_after_seconds) == (
        429,
        "rate_limited",
        1,
    )
    assert "reads" in caught.value.message
    clock.now += 100.0
    admission.share_among(3)
    assert spend(admission, "throttle_read") == 2
    # A tenant without an entry reads without limit; one with an entry, at the default rate.
    for _ in range(1_000):
        admission.throttle_read("globex")
    entry = parse_tenant_limits('{"acme": {}}')
    assert spend(Admission(entry), "throttle_read") == DEFAULT_READ_RATE.burst


SETTINGS = load_settings(
    {
        "SETTLE_API_TOKENS": "acme:tok-acme",
        "SETTLE_TENANT_LIMITS": json.dumps(
            {"acme": {"read_rate": {"per_second": 0.01, "burst": 4}}}
        ),
    }
)
AUTH = {"Authorization": "Bearer tok-acme"}
READS = [
    "/v1/settlements",
    "/v1/settlements/s-1",
    "/v1/accounts/acme:funding:USD/balance",
    "/v1/accounts/acme:funding:USD/entries",
]


async def test_every_read_over_the_read_rate_answers_429_with_retry_after() -> None:
    app = create_app(FakeAcceptor(), FakeReads(), SETTINGS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ledger") as client:
        served = [(await client.get(path, headers=AUTH)).status_code for path in READS]
        refused = [await client.get(path, headers=AUTH) for path in READS]
        anonymous = await client.get(READS[0])
        post = await client.post("/v1/settlements", json={}, headers=AUTH)
    assert served == [200, 200, 200, 200]
    for answer in refused:
        assert (answer.status_code, answer.json()["error"]["code"]) == (429, "rate_limited")
        assert answer.headers["retry-after"] == "100"
    assert anonymous.status_code == 401  # no token: refused before any read token is spent
    assert post.status_code == 400  # settlement requests do not take from the reads' bucket


async def test_the_openapi_document_names_the_429_of_every_read() -> None:
    document = create_app(FakeAcceptor(), FakeReads(), SETTINGS).api.openapi()
    reads = {
        path: operations["get"]
        for path, operations in document["paths"].items()
        if path.startswith("/v1/")
    }
    assert len(reads) == len(READS)
    for path, read in reads.items():
        answer = read["responses"]["429"]
        assert "read rate" in answer["description"], path
        assert "Retry-After" in answer["headers"], path
        assert answer["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")


class FakePool:
    """Answers each heartbeat with the next count, or raises it when it is an error."""

    def __init__(self, *answers: int | Exception) -> None:
        self.answers = list(answers)
        self.left: list[tuple[object, ...]] = []

    async def fetchval(self, sql: str, *args: object) -> int:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def execute(self, sql: str, *args: object) -> str:
        self.left.append(args)
        return "DELETE 1"


async def test_a_heartbeat_tells_the_count_and_a_failed_one_keeps_the_last_share() -> None:
    admission = Admission(limits(rate=Rate(4.0, 8)))
    pool = FakePool(3, OSError("connection refused"), 2)
    registry = ReplicaRegistry(pool, admission.share_among, replica_id="r-1")  # type: ignore[arg-type]
    assert await registry.beat() == 3
    assert admission.replicas == 3
    with pytest.raises(OSError):
        await registry.beat()
    assert (registry.live, admission.replicas) == (3, 3)
    assert await registry.beat() == 2
    assert admission.replicas == 2
    await registry.leave()
    assert pool.left == [("ledger", "r-1")]
    with pytest.raises(ValueError, match="heartbeat"):
        ReplicaRegistry(pool, admission.share_among, heartbeat=0)  # type: ignore[arg-type]
