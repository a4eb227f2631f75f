"""The send gate at the moment of writing, through HTTP1Client against a real loopback server:
a closed gate writes nothing and says so, each task's gate is its own, and a call that reaches
its write past its deadline is not written either."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from services.platform import send_gate
from services.platform.http1 import NotSent
from tests.unit.test_http1 import OK, always, client, serving


async def test_a_closed_gate_writes_nothing_and_is_marked_refused() -> None:
    async with serving(always(OK)) as server:
        http = client()
        with send_gate.guarded(lambda: False) as gate, pytest.raises(NotSent):
            await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()
    assert gate.refused and server.requests == []


async def test_an_open_gate_lets_the_request_out() -> None:
    async with serving(always(OK)) as server:
        http = client()
        with send_gate.guarded(lambda: True) as gate:
            answer = await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()
    assert answer.status == 200 and not gate.refused and len(server.requests) == 1


async def test_each_task_asks_its_own_gate() -> None:
    async with serving(always(OK)) as server:
        http = client()

        async def send(n: int) -> bool:
            with send_gate.guarded(lambda: n != 1) as gate, contextlib.suppress(NotSent):
                await http.request("POST", server.url(), {}, f"n={n}".encode())
            return gate.refused

        refused = await asyncio.gather(*(send(n) for n in range(3)))
        await http.aclose()
    assert refused == [False, True, False]
    assert sorted(r.rsplit(b"\r\n", 1)[-1] for r in server.requests) == [b"n=0", b"n=2"]


async def test_outside_a_gate_every_write_may_go() -> None:
    assert send_gate.may_write()
    async with serving(always(OK)) as server:
        http = client()
        await http.request("GET", server.url(), {})
        await http.aclose()
    assert len(server.requests) == 1


async def test_a_call_that_stalls_past_its_deadline_before_writing_sends_nothing() -> None:
    def stalled() -> bool:
        time.sleep(0.5)  # the whole process stands still, as under SIGSTOP
        return True

    async with serving(always(OK)) as server:
        http = client(timeout=0.3)
        with send_gate.guarded(stalled) as gate, pytest.raises(NotSent):
            await http.request("POST", server.url(), {}, b"a=1")
        await http.aclose()
    assert not gate.refused and server.requests == []
