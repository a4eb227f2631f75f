"""Whether a bank account's statements follow each other, and each adds up.

Per account, in order: the electronic sequence number goes up by one, the legal one too (it
may restart at 1 in a new year), and each opening balance is the last closing one. Where one
does not follow, the gap is a `statement_gap` break (a statement not received: its bookings
unseen); where a statement's closing balance is not its opening plus its booked entries, a
`balance_mismatch`.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.adapters.sepa.camt053 import Statement, balance_gap
from services.domain.breaks import BreakType
from services.domain.reconciliation import Break


def statement_gaps(statements: Sequence[Statement]) -> list[Break]:
    """Each of `statements` (in order per account) that does not follow the one before it on
    its account, and each whose closing balance is not its opening plus its booked entries."""
    found: list[Break] = []
    last: dict[str, Statement] = {}
    for st in statements:
        before = last.get(st.account_iban)
        if before is not None:
            found += _gaps_between(before, st)
        last[st.account_iban] = st
        off = balance_gap(st)
        if off:
            found.append(_statement_break(BreakType.BALANCE_MISMATCH, st, "closing", off))
    return found


def _gaps_between(before: Statement, after: Statement) -> list[Break]:
    restarted = after.closing.day.year > before.closing.day.year and after.legal_sequence == 1
    found = _skipped(after, "electronic_sequence", before.electronic_sequence)
    found += [] if restarted else _skipped(after, "legal_sequence", before.legal_sequence)
    if after.opening.signed != before.closing.signed:
        found.append(
            _statement_break(
                BreakType.STATEMENT_GAP,
                after,
                "opening",
                after.opening.signed - before.closing.signed,
                expected=before.closing.signed,
                actual=after.opening.signed,
            )
        )
    return found


def _skipped(after: Statement, field_name: str, last: int | None) -> list[Break]:
    """A statement_gap if `after`'s sequence number `field_name` does not follow `last`."""
    number: int | None = getattr(after, field_name)
    if last is None or number is None or number == last + 1:
        return []
    gap = _statement_break(
        BreakType.STATEMENT_GAP, after, field_name, number - last - 1, last + 1, number
    )
    return [gap]


def _statement_break(
    kind: BreakType,
    st: Statement,
    field_name: str,
    difference: int,
    expected: int | None = None,
    actual: int | None = None,
) -> Break:
    return Break(
        kind,
        None,
        f"statement:{st.account_iban}:{st.statement_id}",
        field_name,
        expected,
        actual,
        difference,
        None if field_name.endswith("sequence") else st.currency,
    )
