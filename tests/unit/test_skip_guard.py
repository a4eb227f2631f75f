"""A skipped test fails the run unless SETTLE_ALLOW_SKIPS=1 lets it pass (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import ALLOW_SKIPS

pytest_plugins = ["pytester"]

SKIPPING = """
import pytest


def test_skips_itself() -> None:
    pytest.skip("no server here")


@pytest.mark.skipif(True, reason="not on this machine")
def test_skipped_by_a_mark() -> None:
    pass


def test_passes() -> None:
    pass
"""
GUARD = "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv(ALLOW_SKIPS, raising=False)
    pytester.makeconftest(GUARD)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_skipping=SKIPPING)
    return pytester


def test_a_skip_fails_the_run_and_keeps_its_reason(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*skipped (no server here); a skip fails the run*"])
    result.stdout.fnmatch_lines(["*skipped (not on this machine); a skip fails the run*"])


def test_a_module_that_skips_as_a_whole_fails_the_run(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_whole="import pytest\npytest.skip('no broker', allow_module_level=True)\n"
    )
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "test_whole.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*skipped (no broker); a skip fails the run*"])


def test_skips_pass_when_the_run_allows_them(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ALLOW_SKIPS, "1")
    result = suite.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == 0
