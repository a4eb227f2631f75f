"""Composition root of the rail simulator: core, webhook sender and HTTP app, then uvicorn."""

from __future__ import annotations

import gc
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from railsim.core import RailSim
from railsim.faults import Faults
from railsim.habits import Habits
from railsim.http import create_app
from railsim.webhooks import RetryPolicy, WebhookSender

DEFAULT_WEBHOOK_SECRET = "whsec_settle_local"


@dataclass(frozen=True, slots=True)
class SimOptions:
    """How one simulator instance behaves."""

    webhook_url: str | None = None  # no webhooks at all when None
    webhook_secret: str = DEFAULT_WEBHOOK_SECRET
    idempotency_window: float = 86400.0  # seconds; 0 makes a rail that ignores keys
    faults: Faults = field(default_factory=Faults)
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # incl. concurrency and delay
    answer_delay: float = 0.0  # seconds every API call takes before it is answered
    habits: Habits = field(default_factory=Habits)  # the account's own activity
    data_dir: Path | None = None  # where the journal and report files are kept; None: memory
    files_port: int | None = None  # the files host's own port; None: /files on the API's


def build(options: SimOptions) -> tuple[RailSim, Starlette]:
    """A core (read back from the data directory, if any) and the ASGI app serving it;
    nothing runs until the app's lifespan starts."""
    sim = RailSim(
        faults=options.faults,
        idempotency_window=options.idempotency_window,
        habits=options.habits,
        data_dir=options.data_dir,
    )
    sender = None
    if options.webhook_url is not None:
        sender = WebhookSender(options.webhook_url, options.webhook_secret, policy=options.retry)
    return sim, create_app(sim, sender, options.answer_delay, options.files_port)


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, as uvicorn binds its own (it listens once served)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


async def serve(options: SimOptions, host: str, port: int) -> None:
    """Serve the simulator on host:port (and its files host on `files_port`, if given) until
    cancelled or interrupted."""
    sim, app = build(options)
    # The simulator keeps every object it makes, so each full collection would scan them all
    # again (a pause that grows with the run); what survived one is set aside instead
    gc.freeze()
    gc.callbacks.append(_set_aside_survivors)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,  # a line per call would cost more CPU than a create
        proxy_headers=False,  # nothing stands in front of the simulator
        # Held answers (the timeout fault) must not keep a stopping server alive
        timeout_graceful_shutdown=2,
    )
    sockets = [listening(host, port)]
    if options.files_port is not None:
        sockets.append(listening(host, options.files_port))
    try:
        await uvicorn.Server(config).serve(sockets=sockets)
    finally:
        sim.close()


def _set_aside_survivors(phase: str, info: dict[str, Any]) -> None:
    """After a full collection, move the survivors where later collections do not look."""
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()
