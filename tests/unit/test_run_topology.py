"""The children `settle run` starts: the relays' lease against the local rail."""

from __future__ import annotations

from services.reconcile.service import schedule_of
from services.shared.config import load_settings
from tools.run.topology import LOCAL_RELAY_LEASE_SECONDS, Ports, StackOptions, service_specs


def relay_leases(env: dict[str, str], options: StackOptions) -> set[str | None]:
    specs = service_specs(Ports(), env, options)
    return {s.env.get("SETTLE_RELAY_LEASE_SECONDS") for s in specs if s.name.startswith("relay")}


def test_settle_runs_relays_hold_a_short_lease_unless_the_caller_sets_one() -> None:
    local = StackOptions(relay_lease_seconds=LOCAL_RELAY_LEASE_SECONDS)
    assert relay_leases({}, local) == {"9"}
    assert relay_leases({"SETTLE_RELAY_LEASE_SECONDS": "45"}, local) == {"45"}
    assert relay_leases({}, StackOptions()) == {None}  # the bench keeps the relay's default
    ledger = next(s for s in service_specs(Ports(), {}, local) if s.name == "ledger")
    assert "SETTLE_RELAY_LEASE_SECONDS" not in ledger.env


def test_the_local_reconciler_reads_again_a_short_overlap_that_still_covers_its_grace() -> None:
    specs = service_specs(Ports(), {}, StackOptions())
    settings = load_settings(next(s for s in specs if s.name == "reconciler").env)
    plan = schedule_of(settings)
    # Every 5 s over 30 s: an object is listed about 7 times, not the 61 of a 5 minute overlap.
    assert plan.overlap <= 6 * plan.interval
    # A settlement found pending stays in the windows until its grace has passed.
    assert plan.overlap >= settings.reconcile_grace_seconds
