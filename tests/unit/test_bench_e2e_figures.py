"""The e2e scenario's arithmetic: percentiles read like PostgreSQL's, honest per-settlement
and per-second figures, and the rate that kept p99 accepted -> paid under a second."""

from __future__ import annotations

import pytest

from tools.bench.e2e_figures import (
    ProcessGroup,
    ProcessSample,
    StatementCost,
    TableWrites,
    cpu_deltas,
    group_cpu,
    highest_rate_within,
    per_second,
    per_settlement,
    percentile,
    sessions_cpu,
    statement_figures,
    statement_name,
    writes_figures,
)
from tools.bench.report import Figure


def test_percentiles_interpolate_like_percentile_cont() -> None:
    samples = [0.4, 0.1, 0.3, 0.2]  # unordered on purpose
    assert percentile(samples, 0.0) == 0.1
    assert percentile(samples, 1.0) == 0.4
    assert percentile(samples, 0.5) == pytest.approx(0.25)
    assert percentile(samples, 0.99) == pytest.approx(0.397)
    assert percentile([7.0], 0.99) == 7.0


def test_percentile_refuses_nothing_and_fractions_outside_zero_to_one() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 99)


def test_per_settlement_divides_and_is_zero_when_nothing_settled() -> None:
    assert per_settlement(300.0, 100) == 3.0
    assert per_settlement(300.0, 0) == 0.0


def test_per_second_never_reads_a_burst_as_an_infinite_rate() -> None:
    assert per_second(500, 10.0, 0.01) == 50.0
    assert per_second(3, 0.0, 0.01) == 300.0


def test_cpu_deltas_count_a_group_started_in_between_from_zero() -> None:
    before = {"ledger": 1.5, "relay": 2.0, "gone": 9.0}
    after = {"ledger": 2.0, "relay": 2.25, "inbox": 0.5}
    assert cpu_deltas(before, after) == {"ledger": 0.5, "relay": 0.25, "inbox": 0.5}


def test_highest_rate_within_the_limit() -> None:
    assert highest_rate_within({100: 0.3, 250: 0.9, 500: 1.4}) == 250
    assert highest_rate_within({100: 0.3, 250: 1.0}) == 100  # at the limit is not under it
    assert highest_rate_within({100: 2.0, 250: None}) is None


# The bench process (1) started the services (2, 3); PostgreSQL (7) is nobody's child here.
TREE = {
    1: ProcessSample(1, 0, own_s=0.5, reaped_s=4.0),  # reaped: a restarted relay, py-spy
    2: ProcessSample(2, 1, own_s=2.0, reaped_s=0.0),
    3: ProcessSample(3, 1, own_s=3.0, reaped_s=0.0),
    4: ProcessSample(4, 3, own_s=0.25, reaped_s=0.0),  # a worker the relay itself started
    7: ProcessSample(7, 0, own_s=1.0, reaped_s=6.0),  # backends that ended
    8: ProcessSample(8, 7, own_s=0.75, reaped_s=0.0),  # a live backend
}


def test_the_load_client_is_its_own_cpu_not_the_services_it_started() -> None:
    groups = {
        "load client": ProcessGroup((1,), descendants=False),
        "ledger": ProcessGroup((2,)),
        "relay": ProcessGroup((3,)),
        "postgres": ProcessGroup((7,)),
    }
    cpu = group_cpu(TREE, groups)
    assert cpu == {"load client": 0.5, "ledger": 2.0, "relay": 3.25, "postgres": 7.75}
    # Every live process once, plus PostgreSQL's ended backends; the bench's reaped children
    # (a restarted service, py-spy) are nobody's.
    assert sum(cpu.values()) == sum(s.own_s for s in TREE.values()) + 6.0


def test_a_group_below_another_group_is_counted_once_in_its_own() -> None:
    cpu = group_cpu(TREE, {"relay": ProcessGroup((3,)), "worker": ProcessGroup((4,))})
    assert cpu == {"relay": 3.0, "worker": 0.25}


def test_a_group_whose_processes_ended_counts_nothing() -> None:
    assert group_cpu(TREE, {"gone": ProcessGroup((99,)), "none": ProcessGroup(())}) == {
        "gone": 0.0,
        "none": 0.0,
    }


def test_rows_written_per_settlement_by_table_and_kind() -> None:
    before = {"settlements": TableWrites(10, 20, 5, 0)}
    after = {
        "settlements": TableWrites(110, 320, 205, 0),
        "outbox": TableWrites(300, 300, 300, 250),  # created between the readings
    }
    figures = writes_figures("100/s writes", before, after, 100)
    assert figures[:4] == [
        Figure("100/s writes settlements inserted", 1.0, "rows/settlement"),
        Figure("100/s writes settlements updated", 3.0, "rows/settlement"),
        Figure("100/s writes settlements hot updated", 2.0, "rows/settlement"),
        Figure("100/s writes settlements deleted", 0.0, "rows/settlement"),
    ]
    assert [f.value for f in figures[4:]] == [3.0, 3.0, 3.0, 2.5]
    assert writes_figures("x", before, before, 0)[0].value == 0.0  # nothing paid: no division


def test_statements_by_calls_and_by_time_per_settlement() -> None:
    costs = [StatementCost(f"SELECT {n}", calls=n * 100, total_ms=1000.0 - n) for n in range(8)]
    figures = statement_figures("100/s", costs, 100)
    by_calls = [f for f in figures if f.unit == "calls/settlement"]
    by_time = [f for f in figures if f.unit == "ms/settlement"]
    assert [f.name for f in by_calls] == [f"100/s sql calls: SELECT {n}" for n in (7, 6, 5, 4, 3)]
    assert by_calls[0].value == 7.0
    assert [f.name for f in by_time] == [f"100/s sql time: SELECT {n}" for n in (0, 1, 2, 3, 4)]
    assert by_time[0].value == 10.0
    assert statement_figures("100/s", [], 100) == []  # pg_stat_statements not loaded


def test_statements_that_begin_alike_stay_apart_once_cut() -> None:
    head = "INSERT INTO settlement_transitions (settlement_id, from_status, to_status, occurred_at"
    one, two = statement_name(head + ") VALUES ($1)"), statement_name(head + ", x) VALUES ($1)")
    assert one != two and one.startswith(head[:60]) and len(one) < len(head) + 20
    assert statement_name("SELECT 1") == "SELECT 1"
    assert statement_name(head + ") VALUES ($1)") == one  # the same text, the same name


def test_sessions_count_their_own_cpu_from_when_they_started() -> None:
    later = {
        **TREE,
        8: ProcessSample(8, 7, own_s=1.25, reaped_s=0.0),
        9: ProcessSample(9, 7, own_s=0.5, reaped_s=0.0),
    }
    del later[4]  # ended in between: lost
    assert sessions_cpu(TREE, later, [8, 9, 4, 8]) == 0.5 + 0.5
    assert sessions_cpu(TREE, later, []) == 0.0
