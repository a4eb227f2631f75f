"""The simulator's effect count read a page at a time: the pages add up to the whole count,
each settlement on one page, and a count that does not move on is refused, not looped over."""

from __future__ import annotations

import httpx
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from railsim.params import Kind
from tests.unit.test_check_rail import BASE, made, sim
from tools.check.errors import SourceUnavailable
from tools.check.rail import SimulatorEffects

__all__ = ["sim"]


async def test_pages_of_the_count_add_up_to_the_whole(sim: RailSim) -> None:
    app = httpx.ASGITransport(app=create_app(sim))
    source = SimulatorEffects(BASE, transport=app, page_size=50)
    pages = [dict(page) async for page in source.pages()]
    assert [len(p) for p in pages] == [50, 50, 21]
    assert sum(len(p) for p in pages) == len({sid for p in pages for sid in p})
    whole = sim.effects()["by_settlement"]
    assert {sid: n for p in pages for sid, n in p.items()} == {
        sid: sum(counts.values()) for sid, counts in whole.items()
    }
    assert (await source.effects()).effects["stl_200"] == 3


async def test_a_page_past_the_last_says_there_is_no_next_one(sim: RailSim) -> None:
    made(sim, Kind.TRANSFER, "stl_late")
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(sim)), base_url=BASE
    ) as client:
        last = (await client.get("/_sim/effects", params={"offset": 121, "limit": 5})).json()
        assert list(last["by_settlement"]) == ["stl_late"] and last["next_offset"] is None
        first = (await client.get("/_sim/effects", params={"offset": 0, "limit": 5})).json()
        assert len(first["by_settlement"]) == 5 and first["next_offset"] == 5
        bad = await client.get("/_sim/effects", params={"limit": "0"})
        assert bad.status_code == 400


async def test_a_count_whose_next_page_does_not_move_on_is_no_verdict() -> None:
    def stuck(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"by_settlement": {"s-1": {"transfers": 1}}, "next_offset": 0}
        )

    source = SimulatorEffects(BASE, transport=httpx.MockTransport(stuck))
    with pytest.raises(SourceUnavailable) as raised:
        await source.effects()
    assert raised.value.source == "rail"
