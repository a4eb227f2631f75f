"""`settle bench --prefill`: the sizes it accepts, the history's paths by the shared rules, and
how the figures of each fill compare with the first fill's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from services.domain.postings import Posting, expected_net, is_balanced, net_by_account
from services.domain.settlement import SettlementStatus, is_transition_valid
from services.platform.service_settings import Settings
from tools.bench import cli
from tools.bench.fills import MIB, over_fills, ratios
from tools.bench.prefill import Filled
from tools.bench.prefill_history import MIX_PER_100, PATHS, final_status, history_steps
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchOptions, Scenario


def test_prefill_sizes_are_read_in_order() -> None:
    assert cli.parse_fills("0,10000000") == (0, 10_000_000)
    assert cli.parse_fills("1000000") == (1_000_000,)
    assert cli.parse_fills("") == ()


@pytest.mark.parametrize("text", ["-1", "ten", "0,,5", "5,5", "1.5"])
def test_prefill_sizes_refused_say_what_to_pass(text: str) -> None:
    with pytest.raises(click.BadParameter, match="distinct whole numbers"):
        cli.parse_fills(text)


def recording(seen: list[BenchOptions]) -> dict[str, Scenario]:
    def run(settings: Settings, options: BenchOptions) -> BenchResult:
        seen.append(options)
        return BenchResult(scenario="e2e", parameters={}, figures=[Figure("x", 1.0, "ms")])

    return {"e2e": run, "ingest": run, "relay": run}


def test_e2e_and_ingest_get_the_sizes_and_no_other_scenario_takes_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[BenchOptions] = []
    monkeypatch.setattr(cli, "scenarios", lambda: recording(seen))
    args = ["--scenario", "e2e", "--prefill", "0,2000", "--no-markdown"]
    assert CliRunner().invoke(cli.bench, args).exit_code == 0
    assert [o.prefill for o in seen] == [(0, 2000)]
    plain = CliRunner().invoke(cli.bench, ["--scenario", "e2e", "--no-markdown"])
    assert plain.exit_code == 0 and seen[-1].prefill == ()
    other = CliRunner().invoke(cli.bench, ["--scenario", "relay", "--prefill", "10"])
    refused = "only these scenarios are pre-filled: e2e, ingest, console"
    assert other.exit_code != 0 and refused in other.output


def test_each_path_is_legal_and_books_what_its_final_status_implies() -> None:
    steps = history_steps("t", "USD")
    for final, path in PATHS.items():
        mine = [s for s in steps if s.final == final.value]
        assert [s.target for s in mine] == [status.value for status in path]
        assert [s.sequence for s in mine] == list(range(1, len(path) + 1))
        for s in mine[1:]:
            assert is_transition_valid(SettlementStatus(s.source), SettlementStatus(s.target))
        postings = [
            p
            for s in mine
            if s.credit and s.debit
            for p in (Posting(s.credit, -100, "USD"), Posting(s.debit, 100, "USD"))
        ]
        assert is_balanced(postings)
        assert net_by_account(postings) == expected_net(100, "USD", "t", final)
        assert [s.after_s for s in mine] == sorted(s.after_s for s in mine)


def test_the_mix_of_final_statuses_repeats_every_hundred() -> None:
    counts = Counter(final_status(n) for n in range(1000))
    assert counts == {status: share * 10 for status, share in MIX_PER_100.items()}


COMPARED = ("100/s accepted rate", "100/s accepted->paid p99")


def run(accepted: float, p99: float) -> list[Figure]:
    return [
        Figure("100/s accepted rate", accepted, "settlements/s"),
        Figure("100/s accepted->paid p99", p99, "ms"),
        Figure("100/s paid", 2000, "settlements"),
    ]


def test_figures_of_each_fill_are_named_and_compared_with_the_first_fill() -> None:
    measured = {0: run(100.0, 400.0), 10_000_000: run(95.0, 500.0)}

    def once(fill: int) -> tuple[list[Figure], list[Figure], Filled | None]:
        filled = Filled(fill, 60.0, 3 * MIB) if fill else None
        return measured[fill], [Figure("100/s writes postings inserted", 6.0, "rows")], filled

    figures, breakdown = over_fills((0, 10_000_000), once, COMPARED)
    values = {f.name: f.value for f in figures}
    assert values["prefill 0: 100/s accepted rate"] == 100.0
    assert values["prefill 10000000: 100/s paid"] == 2000
    assert values["prefill 10000000: fill time"] == 60.0
    assert values["prefill 10000000: database size"] == 3.0  # MiB
    assert "prefill 0: fill time" not in values
    assert values["100/s accepted rate, prefill 10000000 vs 0"] == pytest.approx(95.0)
    assert values["100/s accepted->paid p99, prefill 10000000 vs 0"] == pytest.approx(125.0)
    assert not any(name.startswith("100/s paid, prefill") for name in values)  # not compared
    assert [f.name for f in breakdown] == [
        "prefill 0: 100/s writes postings inserted",
        "prefill 10000000: 100/s writes postings inserted",
    ]


def test_no_ratio_without_a_second_fill_or_a_base() -> None:
    assert ratios({0: run(100.0, 400.0)}, COMPARED) == []
    assert ratios({0: run(0.0, 0.0), 5: run(1.0, 1.0)}, COMPARED) == []
