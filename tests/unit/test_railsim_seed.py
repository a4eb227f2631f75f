"""A bulk seed: objects taken as made at the rail, listed and retrieved like any other, counted
as effects, no webhook sent; a body that is not a seed is refused, nothing taken."""

from __future__ import annotations

import json

import orjson
import pytest

from railsim.core import RailSim
from railsim.params import Kind
from railsim.seed import SeedError, seeded

SID = "6f1c2b1e-2f7e-4c1a-9d1e-3f6a9b2c4d5e"


def transfer(n: int, **extra: object) -> dict[str, object]:
    return {
        "id": f"tr_seed{n}",
        "amount": 100 + n,
        "currency": "usd",
        "destination": "acct_1",
        "created": 1_800_000_000 + n,
    } | extra


def test_seeded_objects_list_newest_first_and_count_as_effects() -> None:
    sim = RailSim()
    body = {
        "transfers": [transfer(2), transfer(1, metadata={"settlement_id": SID})],
        "payouts": [
            {
                "id": "po_seed1",
                "amount": 7,
                "currency": "eur",
                "destination": "ba_1",
                "created": 1_800_000_001,
                "status": "failed",
            }
        ],
    }
    sim.seed(seeded(orjson.dumps(body)))
    listed = json.loads(sim.list_objects(Kind.TRANSFER, [("limit", "10")]).body)
    assert [t["id"] for t in listed["data"]] == ["tr_seed2", "tr_seed1"]
    assert listed["data"][1]["metadata"] == {"settlement_id": SID}
    payout = json.loads(sim.retrieve(Kind.PAYOUT, "po_seed1").body)
    assert (payout["status"], payout["amount"]) == ("failed", 7)
    assert sim.effects()["total"] == 3 and sim.effects_for(SID) == {"transfers": 1, "payouts": 0}
    assert sim.take_webhooks() == []


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b"not json",
        orjson.dumps({"transfers": [transfer(1, amount=1.5)]}),
        orjson.dumps({"transfers": [transfer(1, id="po_1")]}),
        orjson.dumps({"transfers": [transfer(1, metadata={"n": 1})]}),
        orjson.dumps({"payouts": [transfer(1, id="po_1", status="lost")]}),
    ],
)
def test_a_body_that_is_no_seed_is_refused(body: bytes) -> None:
    with pytest.raises(SeedError):
        seeded(body)
