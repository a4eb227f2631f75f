"""Judging page by page: pages cover every id once, and the verdicts folded over any split of
the settlements into pages are the verdicts over all of them at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TypeVar

import pytest

from tests.unit.test_check_invariants import FAILED, PAID, REVIEW, settlement, world
from tools.check.facts import DatabaseFacts, EventLogFacts, Offenders, RailFacts
from tools.check.invariants import FIRST, CheckResult, Finding, run_all
from tools.check.pages import IdRange, fold, merge_finding, page_range, without_ledger_wide

V = TypeVar("V")


def test_a_full_page_ends_at_its_last_id_and_a_short_one_at_the_end() -> None:
    assert page_range(None, ["a", "b"], 2) == IdRange(None, "b")
    assert page_range("b", ["c"], 2) == IdRange("b", None)
    assert page_range("c", [], 2) == IdRange("c", None)


def test_merged_findings_keep_the_first_ids_of_the_whole_run_and_count_every_one() -> None:
    full = Finding("effects_over_one", 12, tuple(f"a{n:02}" for n in range(FIRST)))
    later = Finding("effects_over_one", 3, ("b0", "b1", "b2"))
    assert merge_finding(full, later) == Finding("effects_over_one", 15, full.first)
    short = Finding("effects_over_one", 2, ("a0", "a1"))
    many = Finding("effects_over_one", 20, tuple(f"b{n:02}" for n in range(FIRST)))
    merged = merge_finding(short, many)
    assert merged == Finding("effects_over_one", 22, ("a0", "a1", *many.first[: FIRST - 2]))
    assert merge_finding(Finding("effects_over_one", 0, ()), later) == later


def inside(facts: Mapping[str, V], ids: IdRange) -> dict[str, V]:
    """The entries of `facts` whose id falls in `ids`."""
    return {
        sid: fact
        for sid, fact in facts.items()
        if (ids.after is None or sid > ids.after) and (ids.through is None or sid <= ids.through)
    }


def judged_in_pages(
    db: DatabaseFacts, log: EventLogFacts, rail: RailFacts, page_size: int
) -> list[CheckResult]:
    """The verdicts as `run_check` reaches them: page by page, folded."""
    ordered = sorted(db.settlements)
    results: list[CheckResult] = []
    after: str | None = None
    for start in range(0, len(ordered) + 1, page_size):
        ids = page_range(after, ordered[start : start + page_size], page_size)
        page = db if after is None else without_ledger_wide(db)
        page = replace(
            page,
            settlements=inside(db.settlements, ids),
            transferred=frozenset(inside(dict.fromkeys(db.transferred), ids)),
            instruction_failed=frozenset(inside(dict.fromkeys(db.instruction_failed), ids)),
        )
        page_log = replace(log, by_settlement=inside(log.by_settlement, ids))
        if after is not None:
            page_log = replace(page_log, undecodable=())
        results = fold(
            results, run_all(page, page_log, replace(rail, effects=inside(rail.effects, ids)))
        )
        if ids.through is None:
            break
        after = ids.through
    return results


@pytest.mark.parametrize("page_size", [1, 2, 3, 50])
def test_any_page_size_gives_the_verdicts_of_one_pass(page_size: int) -> None:
    db, log, rail = world()
    extra = [settlement(f"s-{n:02}", (PAID, FAILED, REVIEW)[n % 3][:2]) for n in range(14)]
    db = replace(
        db,
        settlements={**db.settlements, **{s.id: s for s in extra}},
        unapplied_webhooks=Offenders(2, ("evt_1", "evt_2")),
    )
    log = replace(
        log, by_settlement={**log.by_settlement, "a-stray": {}, "z-stray": {}}, undecodable=("0:7",)
    )
    rail = replace(rail, effects={**rail.effects, "s-03": 2, "s-paid": 3, "s-zz": 1})

    whole = run_all(db, log, rail)

    assert not all(r.ok for r in whole)
    assert judged_in_pages(db, log, rail, page_size) == whole
