"""One chaos run: private servers, the supervised stack, load and faults, then the verdict.

Order: private PostgreSQL and Kafka up and migrated; ledger, two relays, inbox, reconciler and
simulator started; the load (tools/chaos/load.py) and the seeded schedule run side by side for
the run's seconds; then anything paused is resumed, everything is made to answer again, the
batch is followed to final states, `settle check` judges the guarantees after waiting for
quiet, and a last reconciliation must find nothing open (tools/chaos/reconciled.py). Whatever
happens, the children and both servers are stopped before returning. The run passes only when
every fault landed (tools/chaos/evidence.py) and no process of it is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.adapters.kafka.access import SECURITY_VARIABLES
from services.adapters.postgres.migrate import upgrade
from services.contracts.topics import COMMANDS, EVENTS
from tools.chaos import infra as private
from tools.chaos.bank import bank_days_pass, bank_verdict
from tools.chaos.batch import outcome as batch_outcome
from tools.chaos.batch import settle as settle_batch
from tools.chaos.evidence import leftovers
from tools.chaos.inject import Injected, Injector
from tools.chaos.load import Submitted, submit
from tools.chaos.reconciled import reconciliation_verdict
from tools.chaos.schedule import (
    BANK_PROFILE,
    PAUSE_BEYOND_LEASE_S,
    fault_schedule,
    self_pauses,
)
from tools.chaos.wake import Waker
from tools.check.cli import effect_source
from tools.check.report import as_json
from tools.check.run import CheckOptions, Report, run_check
from tools.infra import kafka, postgres
from tools.infra.procs import free_ports
from tools.run.demo import FINAL
from tools.run.serve import stack_settings
from tools.run.submit import Batch, signing_secrets
from tools.run.supervisor import Supervisor
from tools.run.topology import Ports, StackOptions, service_specs

LEASE_S = 6.0
LOAD_SHARE = 0.75  # the batch goes out over this share of the run
POLL_S = 1.0
LEFTOVER_WAIT_S = 15.0  # for stopped processes to be gone before they count as left behind


@dataclass(frozen=True)
class ChaosOptions:
    """What to run and for how long."""

    count: int
    seconds: float
    seed: int
    rail_ignores_keys: bool = False
    rails: tuple[str, ...] = ("sim",)  # sim, sepa or both: the bank simulator runs for sepa
    settle_timeout_s: float = 240.0  # after the run, for the batch to reach final states
    quiet_timeout_s: float = 120.0  # then for in-flight work to finish before the check


def child_env(infra: private.PrivateInfra) -> dict[str, str]:
    """The services' environment: the private servers, a short relay lease, no failpoints
    (the relays get theirs from the schedule's `self_pauses`)."""
    # The private broker speaks PLAINTEXT: security settings meant for another broker stay out.
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "SETTLE_FAILPOINTS" and k not in SECURITY_VARIABLES
    }
    env.update(
        SETTLE_DATABASE_URL=infra.database_url,
        SETTLE_KAFKA_BOOTSTRAP=infra.bootstrap,
        SETTLE_TOPIC_PREFIX=infra.topic_prefix,
        SETTLE_RELAY_LEASE_SECONDS=f"{LEASE_S:g}",
    )
    return env


def _wake_all(supervisor: Supervisor) -> None:
    """Resume every child that is paused, by the schedule or by itself."""
    for spec in supervisor.specs():
        if supervisor.is_paused(spec.name):
            supervisor.resume(spec.name)


async def _recover(supervisor: Supervisor, infra: private.PrivateInfra) -> None:
    """Resume what is paused, start what is down, wait until every child answers."""
    _wake_all(supervisor)
    if postgres.server_pid(infra.paths) is None:
        await asyncio.to_thread(postgres.start, infra.paths)
    if kafka.broker_pid(infra.paths) is None:
        await asyncio.to_thread(kafka.start, infra.paths)
    await supervisor.wait_healthy()


async def _start_services(
    options: ChaosOptions,
    infra: private.PrivateInfra,
    supervisor: Supervisor,
    env: dict[str, str],
    say: Any,
) -> Ports:
    pg_port = int(infra.database_url.rsplit(":", 1)[1].split("/")[0])
    kafka_port = int(infra.bootstrap.rsplit(":", 1)[1])
    avoid = {pg_port, kafka_port, kafka_port + 1}
    ports = Ports.from_base(free_ports(Ports.SPAN, avoid))
    stack = StackOptions(
        "none",
        options.rail_ignores_keys,
        options.seed,
        rails=options.rails,
        bank_state=infra.paths.run / "banksim",
        # A restarted bank comes back with its chaos faults; the schedule calms it at the end.
        bank_fault_profile=BANK_PROFILE,
        # A real account's other activity beside settle's, and objects a killed rail keeps.
        account_activity="realistic",
        rail_state=infra.paths.run / "railsim",
    )
    specs = service_specs(ports, env, stack)
    pauses = self_pauses(options.seed, options.count, options.rails)
    for spec in specs:
        if spec.name in pauses:  # each relay stops itself where its failpoints say
            spec.env = {**spec.env, "SETTLE_FAILPOINTS": pauses[spec.name]}
    await supervisor.start_all(specs)
    say(f"services up on ports {ports.ledger}..{ports.console}; logs in {supervisor.log_dir}")
    return ports


async def _under_faults(
    options: ChaosOptions,
    infra: private.PrivateInfra,
    supervisor: Supervisor,
    batch: Batch,
    ports: Ports,
    say: Any,
) -> tuple[Submitted, Report, list[Injected]]:
    """Send the batch while the seeded faults land and relays stop themselves; recover; wait
    for the batch to settle and judge the guarantees. (What was sent, the check, the faults.)"""
    settings = stack_settings(child_env(infra), ports, options.rails)
    rail_url = ports.url(ports.railsim)
    schedule = fault_schedule(options.seed, options.seconds, LEASE_S, options.rails)
    injector = Injector(supervisor, infra, rail_url, say, ports.url(ports.banksim))
    nap = random.Random(f"{options.seed}/wake")
    began = time.monotonic()
    pauses = self_pauses(options.seed, options.count, options.rails)
    waker = asyncio.create_task(
        Waker(injector, pauses, lambda: LEASE_S + nap.uniform(*PAUSE_BEYOND_LEASE_S), began).run()
    )
    load = asyncio.create_task(
        submit(
            batch,
            options.seconds * LOAD_SHARE,
            ports.url(ports.ledger),
            infra.kafka,
            settings.topic(COMMANDS),
        )
    )
    try:
        await injector.run(schedule, began)
        await asyncio.sleep(max(0.0, began + options.seconds - time.monotonic()))
        say("schedule done; recovering")
        await _recover(supervisor, infra)
        sent: Submitted = await load
        say(f"load sent: {sent.kafka_messages} Kafka messages, HTTP {dict(sent.http)}")
        # Relays go on stopping themselves while the batch settles; they are woken as before.
        await settle_batch(settings, batch, options.settle_timeout_s, say)
        if "sepa" in options.rails:
            await bank_days_pass(settings, ports.url(ports.banksim), say)
        say(f"checking the invariants (waiting up to {options.quiet_timeout_s:.0f} s for quiet)")
        check = await run_check(
            settings.database_url,
            infra.kafka,
            settings.topic(EVENTS),
            effect_source(settings, rail_url),
            CheckOptions(wait_quiet_s=options.quiet_timeout_s),
        )
    finally:
        load.cancel()
        waker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waker  # a waker that failed on its own says so here
        _wake_all(supervisor)  # no relay stays frozen past the check
    return sent, check, injector.carried_out()


async def _stack(
    options: ChaosOptions, infra: private.PrivateInfra, supervisor: Supervisor, say: Any
) -> dict[str, Any]:
    env = child_env(infra)
    ports = await _start_services(options, infra, supervisor, env, say)
    settings = stack_settings(child_env(infra), ports, options.rails)
    token, tenant = next(iter(settings.tenant_by_token.items()))
    run, secrets = f"chaos{options.seed}-{uuid.uuid4().hex[:6]}", signing_secrets(settings, tenant)
    batch = Batch(run, tenant, token, options.count, secrets, rails=options.rails)
    rail_url = ports.url(ports.railsim)
    sent, check, injected = await _under_faults(options, infra, supervisor, batch, ports, say)
    reconciled = await reconciliation_verdict(settings, rail_url)
    if "sepa" in options.rails:
        reconciled = {"stripe": reconciled, "sepa": await bank_verdict(settings)}
        reconciled["ok"] = all(part["ok"] for part in reconciled.values())
    statuses, booked = await batch_outcome(settings, batch)
    final = sum(statuses.get(s, 0) for s in FINAL)
    exactly_once = booked["rows"] == booked["distinct_references"] == options.count
    landed = all(i.landed for i in injected)
    return {
        "batch": batch.run_id,
        "faults": [i.as_json() for i in injected],
        "faults_landed": landed,
        "restarts": {s.name: supervisor.restarts(s.name) for s in supervisor.specs()},
        "submitted": {
            "settlements": options.count,
            "kafka_messages": sent.kafka_messages,
            "kafka_resends": sent.kafka_resends,
            "http_answers": dict(sorted(sent.http.items())),
            "http_gave_up": sent.http_gave_up,
        },
        "booked": {**booked, "exactly_once": exactly_once},
        "final_states": dict(sorted(statuses.items())),
        "all_final": final == options.count,
        "checks": as_json(check),
        "reconciliation": reconciled,
        "ok": check.ok and exactly_once and final == options.count and landed and reconciled["ok"],
    }


async def run_chaos(options: ChaosOptions, say: Any) -> tuple[dict[str, Any], Path]:
    """The run's report (JSON-ready) and its directory; servers and children always stopped."""
    began = time.monotonic()
    infra = private.plan(options.seed)
    head = {
        "seed": options.seed,
        "rails": list(options.rails),
        "rail_ignores_keys": options.rail_ignores_keys,
        "count": options.count,
        "seconds": options.seconds,
        "relay_lease_seconds": LEASE_S,
        "postgres": infra.database_url,
        "kafka": infra.bootstrap,
    }
    supervisor = Supervisor(infra.paths.run / "logs")
    try:
        say(f"private PostgreSQL {infra.database_url}, Kafka {infra.bootstrap}: starting")
        await asyncio.to_thread(private.start, infra)
        await asyncio.to_thread(upgrade, infra.database_url)
        body = await _stack(options, infra, supervisor, say)
    finally:
        say("stopping the services and the private servers")
        await supervisor.stop_all(grace=10.0)
        await asyncio.to_thread(private.stop, infra)
    # Nothing of the run may outlive it: no service, no child of one, no server.
    left = await leftovers(infra.paths.run, infra.database_url, LEFTOVER_WAIT_S)
    report = {**head, **body, "leftover_processes": left}
    report["ok"] = body["ok"] and not left
    report["elapsed_seconds"] = round(time.monotonic() - began, 1)
    if report["ok"]:
        private.purge(infra)
    return report, infra.paths.run
