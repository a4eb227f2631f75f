"""Where production lets a rail's address point: Stripe's own API, or a host the deploy names
in `SETTLE_RAIL_HOSTS` (comma-separated host names, e.g. a Stripe proxy and the SEPA bank's
host-to-host interface). The secret key goes with every request to the Stripe API's base,
and payment files with every upload to the bank, so a mistyped or injected address must
stop the start rather than receive them."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

from services.domain.errors import ConfigError

RAIL_HOSTS = "SETTLE_RAIL_HOSTS"
STRIPE_API = "https://api.stripe.com"


def parse_hosts(value: object) -> object:
    """The host names of a `SETTLE_RAIL_HOSTS` value, lower case; ValueError for anything
    but a bare host name (a scheme, a port, a path, a user or an IPv6 literal is not one).
    Other values are passed on to validation."""
    if not isinstance(value, str):
        return value
    hosts = frozenset(h.strip().lower() for h in value.split(",") if h.strip())
    for host in hosts:
        if any(mark in host for mark in ":/@ "):
            raise ValueError(f"{host!r} is not a host name; give hosts alone, e.g. api.example.com")
    return hosts


def pinned_refusals(
    variable: str, url: str, hosts: frozenset[str], why: str, own: str | None = None
) -> Iterator[ConfigError]:
    """Production's rule for a rail's address in `variable`: https, and either `own` (the
    rail's own address, a trailing slash aside) or on a host `SETTLE_RAIL_HOSTS` names; `why`
    says what goes to it."""
    if not url.startswith("https://"):
        yield ConfigError(variable, f"must be https:// in production mode: {why}")
        return
    if own is not None and url.rstrip("/") == own:
        return
    host = urlsplit(url).hostname or ""
    if host not in hosts:
        allowed = f"neither {own} nor a host {RAIL_HOSTS} names" if own else f"not in {RAIL_HOSTS}"
        yield ConfigError(variable, f"names host {host!r}, {allowed}: {why}")
