"""Where the rail's API answers: `STRIPE_API_BASE` when set; else the local simulator when the
rail is the simulator (`SETTLE_RAIL=sim`); else Stripe's own address. A Stripe key is never
sent to the simulator's address unless the rail is the simulator."""

from __future__ import annotations

from services.platform.config import RailKind
from services.platform.sections import RailSection

SIMULATOR_API = "http://127.0.0.1:12111"


def rail_api_base(settings: RailSection, rail_url: str | None = None) -> str | None:
    """`rail_url` when given, else the configured base, else the simulator's for the simulated
    rail; None means Stripe's own API (the library's default)."""
    if rail_url:
        return rail_url
    if settings.stripe_api_base:
        return settings.stripe_api_base
    return SIMULATOR_API if settings.api_rail is RailKind.SIM else None
