"""Per-tenant limits, read from `SETTLE_TENANT_LIMITS`: a JSON object, one entry per tenant.

    {"acme": {"max_amount": {"EUR": 1000000, "USD": 1200000},
              "destinations": ["acct_1Q2w3E", "acct_9Z8y7X"],
              "prefunded": {"EUR": 50000000},
              "rate": {"per_second": 50, "burst": 100},
              "read_rate": {"per_second": 100, "burst": 200}}}

Every key of a tenant's entry is optional; a tenant without an entry has no limits. In
production every tenant has a `max_amount` for at least one currency, and `destinations` or
`prefunded` (`unguarded` says what a tenant lacks).

    max_amount      per currency, the largest amount (minor units) one settlement may have;
                    a currency not listed is capped only by the ledger's own maximum
    destinations    the only destinations the tenant may pay out to; absent: any
    prefunded       the tenant pays out only money it deposited: per currency, the deposit
                    (minor units); a settlement that would take the deposit plus the funding
                    account's balance below zero is refused, and a currency not listed has
                    no deposit at all
    rate            a token bucket of HTTP settlement requests across all ledger replicas:
                    `per_second` tokens added each second (a JSON number > 0), at most
                    `burst` (a whole number >= 1) held
    read_rate       the same for the tenant's HTTP reads (settlements, accounts); absent,
                    `DEFAULT_READ_RATE`: a tenant with an entry always has a read rate

A rate holds for the whole deployment: each of N live ledger replicas takes its share of it
(`Rate.shared_by`), so N replicas together admit the rate, not N times it.

Amounts are JSON integers, never fractions or exponents, as everywhere money is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from services.domain.money import is_currency

_ENTRY_KEYS = frozenset({"max_amount", "destinations", "prefunded", "rate", "read_rate"})


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket's refill and size."""

    per_second: float  # tokens added each second; requests, not money
    burst: int  # the most tokens held, so the most requests served at once after a pause

    def shared_by(self, replicas: int) -> Rate:
        """One of `replicas` live processes' share: the refill divided among them, and the
        burst too, rounded down but at least 1, so together they admit no more than this."""
        if replicas < 1:
            raise ValueError("replicas: pass 1 or more (this process is live)")
        if replicas == 1:
            return self
        return Rate(self.per_second / replicas, max(1, self.burst // replicas))


@dataclass(frozen=True, slots=True)
class TenantPolicy:
    """One tenant's limits; None (or an empty map) where it has none."""

    max_amount: Mapping[str, int] = field(default_factory=dict)  # currency -> cap, minor units
    destinations: frozenset[str] | None = None  # the allow-list, or None for any destination
    prefunded: Mapping[str, int] | None = None  # currency -> deposit; None: not pre-funded
    rate: Rate | None = None  # HTTP settlement request rate, or None for unlimited
    read_rate: Rate | None = None  # HTTP read rate, or None for unlimited (no entry)


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """Every configured tenant's policy; `of` answers for any tenant."""

    tenants: Mapping[str, TenantPolicy] = field(default_factory=dict)

    def of(self, tenant: str) -> TenantPolicy:
        """`tenant`'s policy: its entry, or no limits at all."""
        return self.tenants.get(tenant, _NO_POLICY)

    def unguarded(self, tenant: str) -> tuple[str, ...]:
        """What `tenant`'s limits lack of what production asks of every tenant: an amount
        cap in some currency, and an allow-list of destinations or a deposit; () if none."""
        policy = self.of(tenant)
        missing = []
        if not policy.max_amount:
            missing.append("amount cap (max_amount for a currency)")
        if policy.destinations is None and policy.prefunded is None:
            missing.append("destination allow-list or deposit (destinations or prefunded)")
        return tuple(missing)

    @property
    def any_prefunded(self) -> bool:
        """Whether any tenant is pre-funded, so booking must check funds at all."""
        return any(p.prefunded is not None for p in self.tenants.values())


_NO_POLICY = TenantPolicy()
NO_LIMITS = TenantLimits()
# The read rate of a tenant whose entry names none: a client polling its settlements now and
# then never meets it, one scraping every page as fast as it can does.
DEFAULT_READ_RATE = Rate(per_second=100.0, burst=200)


def parse_tenant_limits(text: str) -> TenantLimits:
    """The limits `text` (JSON, see the module docstring) describes; ValueError saying where
    it is wrong otherwise."""
    if not text.strip():
        return NO_LIMITS
    try:
        document = json.loads(text, parse_float=Decimal, parse_constant=_no_constant)
    except ValueError as e:
        raise ValueError(f"is not JSON: {e}") from e
    if not isinstance(document, dict):
        raise ValueError('must be a JSON object of tenant -> limits, e.g. {"acme": {...}}')
    return TenantLimits({t: _policy(t, entry) for t, entry in document.items()})


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number settle reads")


def _policy(tenant: str, entry: object) -> TenantPolicy:
    if not isinstance(entry, dict):
        raise ValueError(f"{tenant}: must be an object")
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"{tenant}: unknown key {unknown[0]!r}; use {sorted(_ENTRY_KEYS)}")
    destinations = entry.get("destinations")
    if destinations is not None and not (
        isinstance(destinations, list) and all(isinstance(d, str) and d for d in destinations)
    ):
        raise ValueError(f"{tenant}.destinations: must be a list of destination ids")
    prefunded = entry.get("prefunded")
    return TenantPolicy(
        max_amount=_amounts(f"{tenant}.max_amount", entry.get("max_amount", {}), minimum=1),
        destinations=None if destinations is None else frozenset(destinations),
        prefunded=None if prefunded is None else _amounts(f"{tenant}.prefunded", prefunded, 0),
        rate=None if entry.get("rate") is None else _rate(f"{tenant}.rate", entry["rate"]),
        read_rate=(
            DEFAULT_READ_RATE
            if "read_rate" not in entry
            else _rate(f"{tenant}.read_rate", entry["read_rate"])
        ),
    )


def _amounts(where: str, value: object, minimum: int) -> dict[str, int]:
    if not isinstance(value, dict):
        raise ValueError(f'{where}: must be an object of currency -> minor units, {{"EUR": 100}}')
    for currency, amount in value.items():
        if not is_currency(currency):
            raise ValueError(f"{where}: {currency!r} is not an ISO 4217 code in upper case")
        if type(amount) is not int or amount < minimum:
            raise ValueError(f"{where}.{currency}: must be a whole number >= {minimum}")
    return dict(value)


def _rate(where: str, value: object) -> Rate:
    if not isinstance(value, dict) or set(value) != {"per_second", "burst"}:
        raise ValueError(f'{where}: must be {{"per_second": <number>, "burst": <whole number>}}')
    per_second, burst = value["per_second"], value["burst"]
    if isinstance(per_second, bool) or not isinstance(per_second, int | Decimal) or per_second <= 0:
        raise ValueError(f"{where}.per_second: must be a number > 0")
    if type(burst) is not int or burst < 1:
        raise ValueError(f"{where}.burst: must be a whole number >= 1")
    return Rate(float(per_second), burst)
