"""Properties of reconciliation: order never matters, agreement gives nothing, money stays int."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from services.domain.breaks import BreakType
from services.domain.money import MAX_AMOUNT
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import LedgerRecord, RailObject, Report
from services.domain.settlement import SettlementStatus
from services.reconcile.compare import compare
from services.reconcile.report import canonical_json, report_document
from tests.unit.reconcile_cases import GRACE, NOW, payout, settled, sid, transfer

S = SettlementStatus
amounts = st.integers(1, MAX_AMOUNT)
sent_times = st.one_of(st.none(), st.integers(NOW - 40 * 86_400, NOW))


@st.composite
def agreeing(draw: st.DrawFn, n: int) -> tuple[LedgerRecord, list[RailObject]]:
    """Settlement `n` and the rail objects that agree with it, in one of the agreeing shapes."""
    amount, currency = draw(amounts), draw(st.sampled_from(["EUR", "USD", "JPY"]))
    shape = draw(st.sampled_from(["paid", "reversed", "in_flight", "failed", "unsent", "none"]))
    kind = draw(st.sampled_from(list(PayoutMethod)))
    status = {"paid": S.PAID, "reversed": S.REVERSED, "in_flight": S.SUBMITTED}.get(shape, S.FAILED)
    if shape == "none":
        status = draw(st.sampled_from([S.DISPATCHING, S.NEEDS_REVIEW, S.FAILED]))
    if shape == "unsent":
        status = S.ACCEPTED
    record = settled(n, status, amount=amount, sent_at=None if shape == "unsent" else NOW - 1)
    record = record._replace(currency=currency)
    if shape in ("unsent", "none"):
        return record, []
    if kind is PayoutMethod.TRANSFER and shape in ("paid", "reversed"):
        obj = transfer(n, amount=amount, reversed_=amount if shape == "reversed" else 0)
    else:
        words = {"paid": ["paid"], "in_flight": ["pending", "in_transit"]}
        rail_status = draw(st.sampled_from(words.get(shape, ["failed", "canceled"])))
        obj = payout(n, rail_status, amount=amount)
    return record, [obj._replace(currency=currency, created=draw(st.integers(0, NOW)))]


@st.composite
def agreeing_books(draw: st.DrawFn) -> tuple[list[LedgerRecord], list[RailObject]]:
    cases = [draw(agreeing(n)) for n in range(draw(st.integers(0, 12)))]
    return [r for r, _ in cases], [o for _, objs in cases for o in objs]


records = st.builds(
    lambda n, status, amount, currency, ref, sent_at: settled(
        n, status, amount=amount, sent_at=sent_at, reference=ref
    )._replace(currency=currency),
    st.integers(0, 5),
    st.sampled_from(list(S)),
    st.sampled_from([1, 999, 1_000]),
    st.sampled_from(["EUR", "USD"]),
    st.booleans(),
    sent_times,
)
objects = st.builds(
    lambda n, kind, amount, reversed_, status, named, created: RailObject(
        f"{'tr' if kind is PayoutMethod.TRANSFER else 'po'}_{n}",
        kind,
        amount,
        min(reversed_, amount) if kind is PayoutMethod.TRANSFER else 0,
        "EUR",
        f"acct_{n % 3}",
        None if kind is PayoutMethod.TRANSFER else status,
        created,
        sid(named) if named is not None else None,
    ),
    st.integers(0, 7),
    st.sampled_from(list(PayoutMethod)),
    st.sampled_from([1, 999, 1_000]),
    st.sampled_from([0, 1, 1_000]),
    st.sampled_from(["pending", "in_transit", "paid", "failed", "canceled"]),
    st.one_of(st.none(), st.integers(0, 7)),
    st.integers(NOW - 10, NOW),
)
ledgers = st.lists(records, max_size=8, unique_by=lambda r: r.settlement_id)
rails = st.lists(objects, max_size=10, unique_by=lambda o: o.object_id)


@given(agreeing_books(), st.randoms(use_true_random=False))
def test_a_ledger_and_a_rail_that_agree_give_no_break(
    books: tuple[list[LedgerRecord], list[RailObject]], rnd: Any
) -> None:
    ledger, rail = books
    rnd.shuffle(rail)
    assert compare(ledger, rail, NOW, grace=GRACE) == Report((), ())


@given(ledgers, rails, st.randoms(use_true_random=False))
def test_the_same_inputs_in_any_order_give_the_same_report_byte_for_byte(
    ledger: list[LedgerRecord], rail: list[RailObject], rnd: Any
) -> None:
    first = canonical_json(report_document(compare(ledger, rail, NOW, grace=GRACE)))
    rnd.shuffle(ledger)
    rnd.shuffle(rail)
    again = canonical_json(report_document(compare(ledger + ledger, rail, NOW, grace=GRACE)))
    assert again == first


@given(ledgers, rails)
def test_amounts_in_a_report_stay_integers(
    ledger: list[LedgerRecord], rail: list[RailObject]
) -> None:
    report = compare(ledger, rail, NOW, grace=GRACE)
    for item in report.breaks:
        if item.field in ("amount", "amount_reversed", "count"):
            assert type(item.expected) is int and type(item.actual) is int
        if item.difference is not None:
            assert type(item.difference) is int
            assert item.difference == item.actual - item.expected  # type: ignore[operator]
    for pending in report.pending:
        assert type(pending.age) is int


@given(st.integers(NOW - 3 * GRACE, NOW), st.sampled_from([S.SUBMITTED, S.PAID, S.REVERSED]))
@example(NOW - GRACE, S.PAID)
@example(NOW - GRACE + 1, S.PAID)
def test_a_missing_object_is_pending_exactly_until_the_grace_period_ends(
    sent_at: int, status: SettlementStatus
) -> None:
    report = compare([settled(1, status, sent_at=sent_at)], [], NOW, grace=GRACE)
    early = NOW - sent_at < GRACE
    assert [p.would_be for p in report.pending] == ([BreakType.MISSING_AT_RAIL] if early else [])
    assert [b.break_type for b in report.breaks] == ([] if early else [BreakType.MISSING_AT_RAIL])
