"""The simulator's own CPU per transfer: `python -m railsim.cpu_probe --transfers 3000`.

Starts `settle railsim` as a child with its webhooks pointed at a receiver in this process,
creates N transfers over HTTP and waits until N `transfer.created` webhooks have arrived; the
child's user + system CPU seconds read from /proc before and after, divided by N, is the
figure: one create answered plus one webhook delivered. Linux only (/proc).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable

import click
import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds the process has used so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return int(fields[11]) / TICKS, int(fields[12]) / TICKS


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_until(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise click.ClickException(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def _create(client: httpx.AsyncClient, count: int, clients: int) -> None:
    queue = iter(range(count))

    async def worker() -> None:
        for n in queue:
            form = {"amount": "1250", "currency": "usd", "destination": "acct_probe"}
            form["metadata[settlement_id]"] = f"probe-{n}"
            answer = await client.post("/v1/transfers", data=form)
            answer.raise_for_status()

    await asyncio.gather(*(worker() for _ in range(clients)))


async def probe(
    pid: int, sim_port: int, hook_port: int, transfers: int, clients: int
) -> tuple[float, float]:
    """User and system CPU milliseconds simulator `pid` spends per transfer created and
    announced."""
    received = 0

    async def hook(request: Request) -> Response:
        nonlocal received
        body = await request.body()  # read first: `+=` would load the count before awaiting
        received += b'"transfer.created"' in body
        return Response(status_code=200)

    app = Starlette(routes=[Route("/hooks", hook, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, port=hook_port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    headers = {"Authorization": "Bearer sk_test_probe"}
    base = f"http://127.0.0.1:{sim_port}"
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            await _started(client)
            await _create(client, 200, clients)  # warm up: imports, caches, connections
            await _wait_until(lambda: received >= 200, 60, "warm-up webhooks")
            before, received = cpu_seconds(pid), 0
            await _create(client, transfers, clients)
            await _wait_until(lambda: received >= transfers, 120, "webhooks")
            (user, system), (user_before, system_before) = cpu_seconds(pid), before
            return (
                (user - user_before) * 1000 / transfers,
                (system - system_before) * 1000 / transfers,
            )
    finally:
        server.should_exit = True
        await serving


async def _started(client: httpx.AsyncClient) -> None:
    for _ in range(900):  # the child imports the whole CLI first: slow on a busy machine
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get("/healthz")).is_success:
                return
        await asyncio.sleep(0.1)
    raise click.ClickException("timed out waiting for the simulator to start")


@click.command()
@click.option("--transfers", default=3000, show_default=True, type=click.IntRange(min=1))
@click.option("--clients", default=16, show_default=True, type=click.IntRange(min=1))
@click.argument("extra", nargs=-1)
def main(transfers: int, clients: int, extra: tuple[str, ...]) -> None:
    """Print the simulator's CPU ms per transfer (create + webhook); EXTRA goes to railsim."""
    hook_port, sim_port = _free_port(), _free_port()
    args = ["railsim", "--port", str(sim_port), "--webhook-url"]
    args += [f"http://127.0.0.1:{hook_port}/hooks", *extra]
    settle = os.path.join(os.path.dirname(sys.executable), "settle")
    child = subprocess.Popen([settle, *args], stderr=subprocess.DEVNULL)
    try:
        user, system = asyncio.run(probe(child.pid, sim_port, hook_port, transfers, clients))
    finally:
        child.terminate()
        child.wait(10)
    click.echo(
        f"railsim CPU per transfer: {user + system:.3f} ms (user {user:.3f}, system"
        f" {system:.3f}) over {transfers} transfers"
    )


if __name__ == "__main__":
    main()
