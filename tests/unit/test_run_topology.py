"""The children `settle run` starts: the relays' lease against the local rail."""

from __future__ import annotations

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
