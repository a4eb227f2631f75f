"""The children `settle run` starts: the relays' lease against the local rail, the public and
admin ports of each, and the admin URLs it prints."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from rich.console import Console

from tools.run.report import print_services
from tools.run.supervisor import ServiceSpec, Supervisor
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


def test_the_ledger_and_the_inbox_get_their_admin_ports_and_keep_their_public_ones() -> None:
    specs = {s.name: s for s in service_specs(Ports(), {}, StackOptions())}
    assert specs["ledger"].args[-4:] == ["--port", "8081", "--admin-port", "9081"]
    assert specs["inbox"].args[-4:] == ["--port", "8083", "--admin-port", "9083"]
    assert (specs["ledger"].admin_port, specs["inbox"].admin_port) == (9081, 9083)
    # The relays' and the reconciler's one port serves only /metrics and operator endpoints.
    assert [specs[n].admin_port for n in ("relay-1", "relay-2", "reconciler")] == [9101, 9102, 8084]
    assert specs["railsim"].admin_port is None


def test_ports_from_a_base_are_distinct_and_keep_the_public_ones_in_place() -> None:
    ports = Ports.from_base(23000)
    every = [
        ports.ledger,
        ports.inbox,
        ports.railsim,
        *ports.relays,
        ports.reconciler,
        ports.ledger_admin,
        ports.inbox_admin,
        ports.console,
        ports.banksim,
    ]
    assert every == list(range(23000, 23000 + Ports.SPAN))
    specs = {s.name: s for s in service_specs(ports, {}, StackOptions())}
    assert specs["ledger"].args[-4:] == ["--port", "23000", "--admin-port", "23006"]
    assert specs["inbox"].args[-4:] == ["--port", "23001", "--admin-port", "23007"]
    assert specs["console"].args[-2:] == ["--port", "23008"]


def test_a_stack_that_pays_by_sepa_runs_the_bank_and_tells_every_service_where_it_is() -> None:
    ports = Ports.from_base(23000)
    assert "banksim" not in {s.name for s in service_specs(ports, {}, StackOptions())}
    options = StackOptions(rails=("sim", "sepa"), bank_state=Path("/state/bank"), seed=7)
    specs = {s.name: s for s in service_specs(ports, {}, options)}
    bank = specs["banksim"]
    assert bank.args[bank.args.index("--port") + 1] == "23009"
    assert bank.args[bank.args.index("--state-dir") + 1] == "/state/bank"
    assert bank.args[bank.args.index("--seed") + 1] == "7"
    for name in ("ledger", "relay-1", "inbox", "reconciler"):
        assert specs[name].env["SETTLE_RAILS"] == "sim,sepa"
        assert specs[name].env["SETTLE_SEPA_BANK_URL"] == "http://127.0.0.1:23009"


class Started:
    """What `print_services` reads of a supervisor whose children all started."""

    log_dir = Path("/logs")

    def __init__(self, specs: list[ServiceSpec]) -> None:
        self._specs = specs

    def specs(self) -> list[ServiceSpec]:
        return self._specs

    def pid(self, name: str) -> int:
        return 4242


def test_settle_run_prints_each_admin_url() -> None:
    console = Console(width=200, record=True)
    specs = service_specs(Ports(), {}, StackOptions())
    print_services(cast(Supervisor, Started(specs)), console)
    rows = {line.split()[1]: line for line in console.export_text().splitlines() if "│" in line}
    assert "http://127.0.0.1:8081" in rows["ledger"] and "http://127.0.0.1:9081" in rows["ledger"]
    assert "http://127.0.0.1:8083" in rows["inbox"] and "http://127.0.0.1:9083" in rows["inbox"]
    assert "http://127.0.0.1:8084" in rows["reconciler"]
    assert "http://127.0.0.1:9085" in rows["console"]


def test_the_console_runs_on_its_own_default_port_with_the_stacks_rail() -> None:
    ports = Ports()
    specs = {s.name: s for s in service_specs(ports, {}, StackOptions())}
    console = specs["console"]
    assert console.args == ["console", "--host", "127.0.0.1", "--port", "9085"]
    assert console.health_url == "http://127.0.0.1:9085/healthz"
    assert console.env["STRIPE_API_BASE"] == ports.url(ports.railsim)
    taken = [
        ports.ledger,
        ports.inbox,
        ports.railsim,
        *ports.relays,
        ports.reconciler,
        ports.ledger_admin,
        ports.inbox_admin,
    ]
    assert ports.console not in taken


def test_the_simulator_gets_the_account_activity_and_keeps_its_objects_where_told() -> None:
    plain = {s.name: s for s in service_specs(Ports(), {}, StackOptions())}["railsim"].args
    assert plain[plain.index("--account-activity") + 1] == "none"
    assert "--data-dir" not in plain
    options = StackOptions(account_activity="realistic", rail_state=Path("/state/rail"))
    real = {s.name: s for s in service_specs(Ports(), {}, options)}["railsim"].args
    assert real[real.index("--account-activity") + 1] == "realistic"
    assert real[real.index("--data-dir") + 1] == "/state/rail"
