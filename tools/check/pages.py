"""Judging the guarantees page by page: settlement id ranges that cover every id exactly once,
and each page's verdicts folded into one verdict per guarantee.

A page is a run of settlements in id order. Its range runs from the previous page's last id
(exclusive) to its own last id (inclusive); the first range is open below and the last one
open above, so facts keyed by an id the database does not know (a stray event, an effect at
the rail) fall into exactly one page too. Findings counted over a page's ids are disjoint
from every other page's, so their totals add up and the first few ids of the whole run are
among the first few of the pages. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from tools.check.facts import NONE, DatabaseFacts
from tools.check.invariants import FIRST, CheckResult, Finding, verdict


class IdRange(NamedTuple):
    """The settlement ids one page answers for, compared as text (uuid order is text order)."""

    after: str | None  # exclusive lower bound; None: from the lowest id
    through: str | None  # inclusive upper bound; None: to the highest id


def page_range(after: str | None, ids: Sequence[str], page_size: int) -> IdRange:
    """The range of a page of `ids` read after `after`: to its last id when the page is full
    (more may follow), else to the end (this is the last page)."""
    return IdRange(after, ids[-1] if len(ids) >= page_size else None)


def without_ledger_wide(db: DatabaseFacts) -> DatabaseFacts:
    """`db` without the findings counted over the whole ledger, so only one page reports them."""
    return replace(
        db,
        stale_outbox=NONE,
        unapplied_webhooks=NONE,
        unexplained_webhooks=NONE,
        unbalanced_currencies=NONE,
        unbalanced_entries=NONE,
        balance_mismatches=NONE,
        webhooks_applied_twice=NONE,
    )


def merge_finding(a: Finding, b: Finding) -> Finding:
    """One finding over the offenders of page `a` and of the page after it."""
    # Every id of a later page sorts after every id of an earlier one.
    return Finding(a.what, a.total + b.total, (*a.first, *b.first)[:FIRST])


def fold(so_far: Sequence[CheckResult], page: Sequence[CheckResult]) -> list[CheckResult]:
    """The verdicts over the pages judged so far and one more page (`so_far` empty at first)."""
    if not so_far:
        return list(page)
    return [
        verdict(
            old.name, (merge_finding(a, b) for a, b in zip(old.detail, new.detail, strict=True))
        )
        for old, new in zip(so_far, page, strict=True)
    ]
