"""Where the rail's API is asked: a Stripe key never goes to the simulator's address."""

from __future__ import annotations

from services.adapters.stripe.address import SIMULATOR_API, rail_api_base
from services.platform.settings import SECRET_SECTIONS, load_settings
from tests.production_env import PRODUCTION


def test_the_simulated_rail_is_the_local_simulator_unless_a_base_is_given() -> None:
    assert rail_api_base(load_settings({})) == SIMULATOR_API
    sim = load_settings({"STRIPE_API_BASE": "http://127.0.0.1:9"})
    assert rail_api_base(sim) == "http://127.0.0.1:9"
    assert rail_api_base(sim, "http://127.0.0.1:7") == "http://127.0.0.1:7"


def test_stripe_without_a_base_is_stripes_own_api_never_the_simulators() -> None:
    # Stripe's own API with the secrets of production, without production mode itself.
    secrets = {
        name: value
        for name, value in PRODUCTION.items()
        if any(name in s.SECRETS for s in SECRET_SECTIONS)
    }
    stripe = load_settings({"SETTLE_RAIL": "stripe", **secrets})
    assert rail_api_base(stripe) is None
