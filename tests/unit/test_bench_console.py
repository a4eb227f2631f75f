"""The console benchmark's judgement, without a database: a plan that reads a large table
sequentially, or reads rows only to filter them out, is flagged; each page's slowest statement
is the one reported; every page asks for what it says and checks the answer is that page."""

from __future__ import annotations

import httpx
import pytest

from tools.bench.console import _check, pages
from tools.bench.console_explain import judge, slowest, title
from tools.bench.console_seed import Sample, Seeded
from tools.bench.runner import BenchError

WALKED = """duration: 812.500 ms  plan:
Query Text: SELECT id FROM settlements WHERE status = 'needs_review' AND id > $1 LIMIT 50
Limit  (cost=0.42..40.1 rows=50 width=16) (actual time=800.1..812.4 rows=50 loops=1)
  ->  Index Scan using settlements_pkey on settlements s  (actual rows=50 loops=1)
        Filter: (status = 'needs_review'::text)
        Rows Removed by Filter: 999950
"""
SCANNED = """duration: 95.000 ms  plan:
Query Text: SELECT count(*) FROM settlements
Aggregate  (actual rows=1 loops=1)
  ->  Seq Scan on settlements  (actual rows=1000000 loops=1)
  ->  Seq Scan on inbox_events_y2027m01 inbox_events_9  (actual rows=0 loops=1)
"""
KEYED = """duration: 0.210 ms  plan:
Query Text: SELECT * FROM settlements WHERE id = $1
Index Scan using settlements_pkey on settlements  (actual rows=1 loops=1)
  Index Cond: (id = $1)
"""
ROWS = {"settlements": 1_000_000, "inbox_events_y2027m01": 0}
SAMPLE = Sample("01a21a2f-e705-7b7c-8f9e-f6ebe8d29894", "ref 7&8", "payee-7", "acct_7", "tr_1")


def test_a_statement_that_walks_the_table_under_a_filter_is_flagged() -> None:
    plan = judge("review", WALKED, ROWS)
    assert plan is not None
    assert (plan.milliseconds, plan.large_seq_scans, plan.discarded) == (812.5, (), 999_950)
    assert plan.reads_in_vain
    assert title(plan) == "review: 812.50 ms (999,950 rows read and filtered out)"


def test_a_sequential_scan_counts_only_on_a_large_table() -> None:
    plan = judge("overview", SCANNED, ROWS)
    assert plan is not None
    assert plan.large_seq_scans == ("settlements",)
    assert not plan.reads_in_vain
    assert "sequential scan of settlements" in title(plan)


def test_a_keyed_read_is_clean_and_a_notice_without_a_plan_is_no_statement() -> None:
    plan = judge("story", KEYED, ROWS)
    assert plan is not None and not plan.large_seq_scans and not plan.reads_in_vain
    assert title(plan) == "story: 0.21 ms"
    assert judge("story", "relation does not exist, skipping", ROWS) is None


def test_each_page_reports_its_slowest_statement_slowest_first() -> None:
    notices = [("story", KEYED), ("review", KEYED), ("review", WALKED), ("overview", SCANNED)]
    plans = [judge(page, notice, ROWS) for page, notice in notices]
    worst = slowest([p for p in plans if p is not None])
    assert [(p.page, p.milliseconds) for p in worst] == [
        ("review", 812.5),
        ("overview", 95.0),
        ("story", 0.21),
    ]


def test_every_page_asks_for_its_settlement_and_expects_its_page() -> None:
    timed = {name: (path, holds) for name, path, holds in pages(Seeded([SAMPLE], 4242))}
    assert set(timed) == {
        "overview",
        "search by id",
        "search by reference",
        "search by payee",
        "search by destination",
        "search by rail reference",
        "story",
        "review",
        "breaks",
        "dead webhooks",
        "audit",
        "audit deep page",
    }
    path, holds = timed["search by reference"]
    assert path(0) == "/settlements?q=ref%207%268"
    assert holds(0) == ('data-page="settlements"', f'data-id="{SAMPLE.id}"')
    assert timed["search by payee"][1](0) == ('data-page="settlements"',)
    assert timed["audit deep page"][0](3) == "/audit?after=4242"
    assert timed["story"][0](1) == f"/settlements/{SAMPLE.id}"


def test_an_answer_that_is_not_the_page_asked_for_fails_the_run() -> None:
    page = httpx.Response(200, text='<main id="page" data-page="settlements"></main>')
    _check("search", "/settlements?q=x", page, ('data-page="settlements"',))
    with pytest.raises(BenchError, match="does not hold"):
        _check("search", "/settlements?q=x", page, ('data-id="abc"',))
    with pytest.raises(BenchError, match="answered 503"):
        _check("overview", "/", httpx.Response(503, text="store_unavailable"), ())
