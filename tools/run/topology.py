"""The local stack as child specs: one ledger, two relays, the inbox, the reconciler, the
operator console, the rail simulator and, when the stack pays by SEPA, the bank simulator.

Default ports (the services' own defaults): ledger 8081 (admin 9081), inbox 8083 (admin
9083), reconciler 8084, rail simulator 12111, bank simulator 12112, relay metrics 9101 and
9102, console 9085. `--ports-from P` (or SETTLE_RUN_PORTS_FROM) puts them on P..P+9 instead,
in the order ledger, inbox, simulator, relays, reconciler, ledger admin, inbox admin,
console, bank, so a second stack does not collide with the first. The reconciler's and the
relays' one port is an admin port (operator endpoints, /metrics), and so is the console's
(its pages, for operators only); the ledger's and the inbox's admin ports serve /readyz,
/metrics and /docs (inbox events are the operator API's, the reconciler's, to show).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools.run.supervisor import ServiceSpec

HOST = "127.0.0.1"
LOCAL_RECONCILE = {"SETTLE_RECONCILE_INTERVAL": "5", "SETTLE_RECONCILE_GRACE_SECONDS": "10"}
# The local rail answers in milliseconds, so a call that has not answered in 3 s never will:
# `settle run`'s relays hold a 9 s lease (their rail call timeout and session bounds are a
# third of it), and a held answer is retried under its key after 3 s, not 10 (production
# keeps 30 s, and so does the bench, whose figures stay comparable).
LOCAL_RELAY_LEASE_SECONDS = 9.0


@dataclass(frozen=True)
class Ports:
    """Where each child listens."""

    SPAN: ClassVar[int] = 10  # the consecutive ports `from_base` takes

    ledger: int = 8081
    inbox: int = 8083
    railsim: int = 12111
    relays: tuple[int, ...] = (9101, 9102)  # one metrics port per relay replica
    reconciler: int = 8084
    ledger_admin: int = 9081
    inbox_admin: int = 9083
    console: int = 9085  # the operator console's pages
    banksim: int = 12112  # the bank of the SEPA rail

    @classmethod
    def from_base(cls, base: int) -> Ports:
        """`SPAN` consecutive ports from `base`: ledger, inbox, simulator, relay 1, relay 2,
        reconciler, ledger admin, inbox admin, console, bank (each port added since goes last,
        so the others keep the ports they always had)."""
        relays = (base + 3, base + 4)
        return cls(base, base + 1, base + 2, relays, *range(base + 5, base + 10))

    def url(self, port: int) -> str:
        """http://host:port."""
        return f"http://{HOST}:{port}"


@dataclass(frozen=True)
class StackOptions:
    """How the simulator behaves."""

    fault_profile: str = "demo"
    rail_ignores_keys: bool = False  # the simulator ignores keys; relays look transfers up
    seed: int | None = None
    relay_lease_seconds: float | None = None  # None: the relay's own default
    rails: tuple[str, ...] = ("sim",)  # the rails the stack drives: sim, and sepa with a bank
    bank_state: Path | None = None  # where the bank simulator keeps its books (sepa)
    day_seconds: float = 20.0  # the bank simulator's business day
    bank_fault_profile: str | None = None  # the bank's profile at every start; None: the rail's
    # What else happens on the simulated Stripe account: "none", or "realistic" (charges with
    # fees, automatic payouts, other systems' transfers and payouts beside settle's).
    account_activity: str = "none"
    rail_state: Path | None = None  # where the simulator keeps its objects; None: in memory


def service_specs(ports: Ports, env: dict[str, str], options: StackOptions) -> list[ServiceSpec]:
    """The children of `settle run`, simulator and inbox first so the relays find them."""
    rail = ports.url(ports.railsim)
    child_env = {
        **env,
        "STRIPE_API_BASE": rail,
        "SETTLE_RAIL": "sim",
        "SETTLE_RAILS": ",".join(options.rails),
        "SETTLE_SEPA_BANK_URL": ports.url(ports.banksim),
        "SETTLE_RAIL_IDEMPOTENT": "false" if options.rail_ignores_keys else "true",
    }
    banks = [_banksim_spec(ports, child_env, options)] if "sepa" in options.rails else []
    specs = [
        *banks,
        _railsim_spec(ports, child_env, options),
        _with_admin_port("inbox", ports.inbox, ports.inbox_admin, child_env, ports),
        _with_admin_port("ledger", ports.ledger, ports.ledger_admin, child_env, ports),
    ]
    relay_env = dict(child_env)
    if options.relay_lease_seconds is not None:  # the caller's value wins
        relay_env.setdefault("SETTLE_RELAY_LEASE_SECONDS", f"{options.relay_lease_seconds:g}")
    for n, port in enumerate(ports.relays, start=1):
        args = ["relay", "--host", HOST, "--metrics-port", str(port)]
        health = f"{ports.url(port)}/healthz"
        specs.append(ServiceSpec(f"relay-{n}", args, relay_env, port, health, admin_port=port))
    reconciler = ["reconciler", "--host", HOST, "--port", str(ports.reconciler)]
    health = f"{ports.url(ports.reconciler)}/healthz"
    # The local rail settles in milliseconds: the stack reconciles every few seconds with a
    # short grace, so a dropped webhook is healed while the demo watches (production keeps the
    # service's defaults: every 5 minutes, an hour's grace). The caller's values win.
    recon_env = {**LOCAL_RECONCILE, **child_env}
    specs.append(
        ServiceSpec(
            "reconciler",
            reconciler,
            recon_env,
            ports.reconciler,
            health,
            admin_port=ports.reconciler,
        )
    )
    return [*specs, console_spec(ports, child_env)]


def _railsim_spec(ports: Ports, env: dict[str, str], options: StackOptions) -> ServiceSpec:
    """The simulator, posting its webhooks to the inbox, keys honoured or not as asked, with
    the account activity asked for, its objects kept on disk when the stack says where."""
    args = [
        "railsim",
        "--host",
        HOST,
        "--port",
        str(ports.railsim),
        "--webhook-url",
        f"{ports.url(ports.inbox)}/v1/webhooks/stripe",
        "--fault-profile",
        options.fault_profile,
        "--idempotency-window",
        "0" if options.rail_ignores_keys else "86400",
        "--account-activity",
        options.account_activity,
    ]
    if options.seed is not None:
        args += ["--seed", str(options.seed)]
    if options.rail_state is not None:
        args += ["--data-dir", str(options.rail_state)]
    rail = ports.url(ports.railsim)
    return ServiceSpec("railsim", args, env, ports.railsim, f"{rail}/healthz")


def _banksim_spec(ports: Ports, env: dict[str, str], options: StackOptions) -> ServiceSpec:
    """The bank simulator, its books kept where the stack says, its faults the rail's."""
    state = options.bank_state or Path(".run") / f"banksim-{ports.banksim}"
    args = [
        "banksim",
        "--host",
        HOST,
        "--port",
        str(ports.banksim),
        "--state-dir",
        str(state),
        "--day-seconds",
        f"{options.day_seconds:g}",
        "--fault-profile",
        options.bank_fault_profile or options.fault_profile,  # none, demo, chaos, ...
    ]
    if options.seed is not None:
        args += ["--seed", str(options.seed)]
    bank = ports.url(ports.banksim)
    return ServiceSpec("banksim", args, env, ports.banksim, f"{bank}/healthz")


def _with_admin_port(
    name: str, port: int, admin_port: int, env: dict[str, str], ports: Ports
) -> ServiceSpec:
    """A service with a public port and an admin port (inbox, ledger)."""
    args = [name, "--host", HOST, "--port", str(port), "--admin-port", str(admin_port)]
    health = f"{ports.url(port)}/healthz"
    return ServiceSpec(name, args, env, port, health, admin_port=admin_port)


def console_spec(ports: Ports, env: dict[str, str]) -> ServiceSpec:
    """The operator console, on the stack's database and rail."""
    args = ["console", "--host", HOST, "--port", str(ports.console)]
    health = f"{ports.url(ports.console)}/healthz"
    return ServiceSpec("console", args, env, ports.console, health, admin_port=ports.console)
