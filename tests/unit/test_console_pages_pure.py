"""The console's pure parts: charts drawn as escaped inline SVG, the status estimates read
from PostgreSQL's statistics, the sign-in redirect kept on the console, and form tokens."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.console.charts import Bar, bar_chart
from services.console.errors import CsrfRefused
from services.console.overview_queries import estimates
from services.console.pages.login import local_path
from services.console.sessions import check_csrf, csrf_token
from services.domain.money import major_text


def test_a_chart_scales_its_bars_to_the_tallest_and_escapes_every_label() -> None:
    slots = [[Bar(10, "paid", "<b>ten</b>", {"count": "10"})], [Bar(5, "paid", "five", {})]]
    svg = str(bar_chart("c", 'a "title"', slots, "/min"))
    assert svg.startswith('<svg id="c"') and svg.endswith("</svg>")
    assert "<b>" not in svg and "&lt;b&gt;ten&lt;/b&gt;" in svg
    assert "&#34;title&#34;" in svg
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
    assert heights[0] == 2 * heights[1] > 0
    assert 'data-count="10"' in svg


def test_an_empty_chart_draws_no_bar_taller_than_nothing() -> None:
    svg = str(bar_chart("c", "t", [[Bar(0, "paid", "none", {})]], "ms"))
    assert 'height="0.0"' in svg


class Row(dict[str, Any]):
    pass


def test_estimates_come_from_the_statistics_and_say_nothing_before_analyze() -> None:
    row = Row(total=1000, vals=["paid", "submitted"], freqs=[0.9, 0.1])
    total, by_status = estimates(row)  # type: ignore[arg-type]
    assert total == 1000 and by_status["paid"] == 900 and by_status["submitted"] == 100
    assert by_status["needs_review"] is None  # too few for the statistics to show
    never = Row(total=-1, vals=None, freqs=None)  # PostgreSQL 14+: -1 until analysed
    assert estimates(never) == (None, estimates(never)[1])  # type: ignore[arg-type]
    assert set(estimates(never)[1].values()) == {None}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/review", "/review"),
        ("/audit?actor=erin", "/audit?actor=erin"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil", "/"),
        ("", "/"),
    ],
)
def test_after_sign_in_only_a_path_on_the_console_is_followed(given: str, kept: str) -> None:
    assert local_path(given) == kept


def test_a_form_token_belongs_to_one_session_and_is_checked_whole() -> None:
    token = csrf_token("session-a")
    assert token != csrf_token("session-b") and "session-a" not in token
    check_csrf("session-a", token)
    refusals = [
        (None, "csrf_missing"),
        ("", "csrf_missing"),
        (csrf_token("session-b"), "csrf_invalid"),
        (token[:-1], "csrf_invalid"),
    ]
    for given, code in refusals:
        with pytest.raises(CsrfRefused) as refused:
            check_csrf("session-a", given)
        assert refused.value.code == code


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [
        (123456, "EUR", "1,234.56 EUR"),
        (5, "EUR", "0.05 EUR"),
        (700, "JPY", "700 JPY"),
        (1234, "KWD", "1.234 KWD"),
        (-250, "USD", "-2.50 USD"),
        (10**15, "EUR", "10,000,000,000,000.00 EUR"),
    ],
)
def test_amounts_are_written_in_major_units_from_integers(
    amount: int, currency: str, text: str
) -> None:
    assert major_text(amount, currency) == text
