"""The check's disk spill: events and effect counts read back per id range, each id in one
range, a redelivered event kept once, a settlement's effects added up over the rail's pages."""

from __future__ import annotations

from tools.check.facts import EventFact
from tools.check.pages import IdRange
from tools.check.spill import FactSpill


def test_events_and_effects_come_back_by_range_edges_included_once() -> None:
    with FactSpill() as spill:
        spill.add_events([("b", "e1", 1, "created", "accepted"), ("a", "e9", 1, "created", None)])
        spill.add_events([("c", "e3", 1, "created", "accepted"), ("b", "e2", 2, "paid", "paid")])
        spill.add_events([("b", "e1", 1, "created", "accepted")])  # redelivered
        spill.add_effects({"c": 1, "a": 1, "b": 1})
        spill.add_effects({"c": 1})  # a later page of the rail's listing
        spill.seal()

        first, rest = IdRange(None, "b"), IdRange("b", None)
        assert spill.events_in(first) == {
            "a": {"e9": EventFact(1, "created", None)},
            "b": {"e1": EventFact(1, "created", "accepted"), "e2": EventFact(2, "paid", "paid")},
        }
        assert spill.events_in(rest) == {"c": {"e3": EventFact(1, "created", "accepted")}}
        assert spill.effects_in(first) == {"a": 1, "b": 1}
        assert spill.effects_in(rest) == {"c": 2}
        assert spill.effects_in(IdRange("a", "b")) == {"b": 1}
        assert spill.effect_count == 3
