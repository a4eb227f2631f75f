"""What a settlement request must pass before anything of it is written or queued.

    Backlog         a bound on the requests a ledger process holds at once: HTTP requests
                    from admission to answer, and Kafka commands being booked. A full backlog
                    answers HTTP 503 `overloaded` before the body is read; the Kafka intake
                    instead waits to fetch more (`room`), its commands being queued already.
    rate            a token bucket per tenant with a configured rate (`domain.tenant_limits`):
                    over it, HTTP 429 `rate_limited` with Retry-After. Kafka commands are not
                    counted: the intake books one fetched batch at a time, so the consumer's
                    pace bounds them. The tenant's HTTP reads take from a bucket of their own
                    (its `read_rate`), with the same answer.

A rate is the whole deployment's: each bucket holds this process's share of it among the live
ledger replicas (`share_among`, told their number by the heartbeat, `ledger.replicas`), so N
replicas together admit the rate. Until told otherwise a process takes the whole rate.
    check           the tenant's per-currency maximum amount and destination allow-list:
                    422 `amount_over_limit` / `destination_not_allowed`; then the rail that
                    will pay (`domain.rail_routing`): 422 `rail_unavailable`,
                    `currency_not_supported`, `destination_not_supported` or `payee_not_supported`
                    when no rail here can (Kafka: dead-lettered with that code). Like every
                    validation error, raised before the idempotency key is claimed, so the
                    key of a refused request stays unused.

The funding check of pre-funded tenants needs the balance under lock, so the books make it
(`services.ledger.funding`).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from services.domain.rail_routing import REACHES, RailReach, RailRefused, TenantRails, route
from services.domain.tenant_limits import NO_LIMITS, Rate, TenantLimits
from services.ledger.booking import DEFAULT_RAIL
from services.ledger.errors import InvalidRequest, Overloaded, RateLimited
from services.ledger.model import SettlementRequest
from services.platform.service_settings import LedgerSettings

DEFAULT_BACKLOG = 10_000


class TokenBucket:
    """`rate.burst` tokens, refilled at `rate.per_second`; each request takes one."""

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate = rate
        self._tokens = float(rate.burst)
        self._stamp = now

    def take(self, now: float) -> float:
        """Take a token at `now` (monotonic seconds): 0.0 when one was taken, else how many
        seconds until one will be there."""
        self.refill(now)
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate.per_second

    def resize(self, rate: Rate, now: float) -> None:
        """Refill and hold by `rate` from `now` on, keeping the tokens held (up to its burst)."""
        self.refill(now)
        self.rate = rate
        self._tokens = min(float(rate.burst), self._tokens)

    def refill(self, now: float) -> None:
        """Add the tokens refilled up to `now`."""
        elapsed = max(0.0, now - self._stamp)
        self._tokens = min(float(self.rate.burst), self._tokens + elapsed * self.rate.per_second)
        self._stamp = now


class TenantBuckets:
    """A token bucket per tenant that `rate_of` gives a rate, holding this process's share
    of it among `replicas` live ones; tenants without a rate are never throttled."""

    def __init__(
        self, rate_of: Callable[[str], Rate | None], clock: Callable[[], float], what: str
    ) -> None:
        self._rate_of, self._clock, self._what = rate_of, clock, what
        self.replicas = 1
        self._buckets: dict[str, TokenBucket] = {}

    def take(self, tenant: str) -> None:
        """Spend one of `tenant`'s tokens; RateLimited (429) when it has none left."""
        bucket = self._buckets.get(tenant)
        if bucket is None:
            rate = self._rate_of(tenant)
            if rate is None:
                return
            bucket = TokenBucket(rate.shared_by(self.replicas), self._clock())
            self._buckets[tenant] = bucket
        wait = bucket.take(self._clock())
        if wait > 0:
            raise RateLimited(max(1, math.ceil(wait)), self._what)

    def share_among(self, replicas: int) -> None:
        """Hold each tenant's share of its rate among `replicas` live processes from now on."""
        if replicas == self.replicas:
            return
        self.replicas = replicas
        now = self._clock()
        for tenant, bucket in self._buckets.items():
            rate = self._rate_of(tenant)
            if rate is not None:
                bucket.resize(rate.shared_by(replicas), now)


class Backlog:
    """Counts the settlement requests a process holds against `bound`."""

    def __init__(self, bound: int = DEFAULT_BACKLOG) -> None:
        if bound < 1:
            raise ValueError("bound: pass 1 or more requests")
        self.bound = bound
        self.held = 0
        self._roomy = asyncio.Event()  # set while the backlog is not full
        self._roomy.set()

    @property
    def full(self) -> bool:
        """Whether a new HTTP request would be refused."""
        return self.held >= self.bound

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one request while the block runs; Overloaded (503) when the backlog is full."""
        if self.full:
            raise Overloaded("the ledger holds as many settlement requests as it may; retry")
        with self.carry(1):
            yield

    @contextmanager
    def carry(self, count: int) -> Iterator[None]:
        """Hold `count` requests already taken in (a fetched Kafka batch) while the block runs."""
        self._count(count)
        try:
            yield
        finally:
            self._count(-count)

    async def room(self) -> None:
        """Return once the backlog is not full: the Kafka intake fetches only then."""
        await self._roomy.wait()

    def _count(self, change: int) -> None:
        self.held += change
        if self.full:
            self._roomy.clear()
        else:
            self._roomy.set()


class Admission:
    """The limits, rates and backlog one ledger process applies; see the module docstring."""

    def __init__(
        self,
        limits: TenantLimits = NO_LIMITS,
        backlog: int = DEFAULT_BACKLOG,
        clock: Callable[[], float] = time.monotonic,
        rails: Sequence[RailReach] = (REACHES[DEFAULT_RAIL],),
        tenant_rails: TenantRails | None = None,
    ) -> None:
        self.limits = limits
        self.rails = tuple(rails)
        self.tenant_rails = tenant_rails or {}
        self.backlog = Backlog(backlog)
        self.writes = TenantBuckets(lambda t: limits.of(t).rate, clock, "settlement requests")
        self.reads = TenantBuckets(lambda t: limits.of(t).read_rate, clock, "reads")

    def throttle(self, tenant: str) -> None:
        """Spend one of `tenant`'s settlement request tokens; RateLimited (429) when none
        is left."""
        self.writes.take(tenant)

    def throttle_read(self, tenant: str) -> None:
        """Spend one of `tenant`'s read tokens; RateLimited (429) when none is left."""
        self.reads.take(tenant)

    @property
    def replicas(self) -> int:
        """How many live ledger replicas the rates are shared among (1 until told)."""
        return self.writes.replicas

    def share_among(self, replicas: int) -> None:
        """Take this process's share of every rate among `replicas` live ledger replicas
        (itself included; fewer than 1 counts as 1)."""
        replicas = max(1, replicas)
        self.writes.share_among(replicas)
        self.reads.share_among(replicas)

    def check(self, request: SettlementRequest) -> SettlementRequest:
        """`request` with the rail that will pay it; InvalidRequest (422) when it is over its
        tenant's amount cap for its currency, pays a destination the tenant may not pay, or
        no rail here can pay it."""
        policy = self.limits.of(request.tenant)
        cap = policy.max_amount.get(request.currency)
        if cap is not None and request.amount > cap:
            raise InvalidRequest(
                f"amount is over this tenant's limit of {cap} {request.currency} minor units",
                code="amount_over_limit",
                field="amount",
                status=422,
            )
        if policy.destinations is not None and request.destination not in policy.destinations:
            raise InvalidRequest(
                "destination is not one this tenant may pay out to",
                code="destination_not_allowed",
                field="destination",
                status=422,
            )
        try:
            rail = route(
                request.rail,
                request.tenant,
                request.currency,
                request.destination,
                request.payee,
                self.rails,
                self.tenant_rails,
            )
        except RailRefused as e:
            raise InvalidRequest(e.message, code=e.code, field="rail", status=422) from e
        return replace(request, rail=rail)


def admission_of(settings: LedgerSettings) -> Admission:
    """The admission the settings configure: the tenants' limits, the backlog, the rails
    this deployment drives and each tenant's default rail per currency."""
    rails = [REACHES[rail.value] for rail in settings.rails]
    return Admission(
        settings.tenant_limits,
        settings.accept_backlog,
        rails=rails,
        tenant_rails=settings.tenant_rails,
    )
