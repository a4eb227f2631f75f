"""One rail object claimed by two settlements: the ledger books one payment twice.

A settlement claims a rail object by naming it as its `rail_reference`. The first claimant
of a reference is the settlement of the lowest id that names it in the whole ledger (the
caller reads those, `ledger_source.first_claims`, since a run compares a page of
settlements at a time); each other claimant is a `duplicate_in_ledger` break.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break, LedgerRecord


def claimed_twice(
    records: Sequence[LedgerRecord], first_claims: Mapping[str, str] | None
) -> list[Break]:
    """A duplicate_in_ledger for each settlement naming a rail object that a settlement of a
    lower id names too."""
    first = dict(first_claims or {})
    for record in records:  # by settlement id: the first of the page claims it if none did
        if record.rail_reference is not None:
            first.setdefault(record.rail_reference, record.settlement_id)
    return [
        Break(
            BreakType.DUPLICATE_IN_LEDGER,
            r.settlement_id,
            r.rail_reference,
            "rail_reference",
            first[r.rail_reference],
            r.settlement_id,
            None,
            r.currency,
        )
        for r in records
        if r.rail_reference is not None and first[r.rail_reference] != r.settlement_id
    ]
