"""The SEPA rail's side of a reconciliation: the bank's camt.053 statements read as the rail's
objects, and the gaps between the statements.

Each booked debit of a transfer is one object, named by its EndToEndId (a second debit of
the same EndToEndId is another object naming the same settlement: `duplicate_at_rail`); a
batch entry gives one object per transaction of its TxDtls (1:N). A return (a booked credit,
PMNT/ICDT/RRTN) counts against the debit it names by its original EndToEndId, as the amount
reversed. A debit whose EndToEndId names no settlement of settle's is an object without one:
`unknown_at_rail`, under that EndToEndId. Charges (BkTxCd CHRG) are no transfer: each booked
charge debit is a RailCharge, under the bank's reference for the entry, that the run books to
the platform's rail fees account (services/settlement/rail_charges.py). They are counted, with
the entries, transactions and balances read, for the report.

Statements follow each other per account: the electronic sequence number goes up by one,
the legal one too (it may restart at 1 in a new year), and each opening balance is the last
closing one. Where one does not follow, the gap is a `statement_gap` break; where a
statement's closing balance is not its opening plus its booked entries, a
`balance_mismatch`. A statement is read whole or not at all: the file that holds it is
refused (StatementUnreadable) if any of it cannot be read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from services.adapters.sepa.bank import Bank
from services.adapters.sepa.camt053 import Statement, balance_gap, read_camt053
from services.adapters.sepa.camt_entries import CreditDebit, Entry, EntryStatus
from services.adapters.sepa.errors import SepaFileError
from services.domain.breaks import BreakType
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import Break, RailObject, RunKind
from services.domain.sepa import settlement_of
from services.reconcile.errors import StatementUnreadable
from services.reconcile.windows import Window
from services.settlement.rail_charges import RailCharge

CHARGES = "CHRG"
PAGE = 1000
SEPA_RAILS: tuple[str, ...] = ("sepa",)


@dataclass
class Tally:
    """What was read, for the run's report: per source, entries and transactions, charges,
    and the balances found."""

    statements: int = 0
    entries: int = 0
    transactions: int = 0
    charges: int = 0  # minor units of the charge entries
    charges_booked: int = 0  # how many charge entries this run booked (the rest were before)
    balances: list[dict[str, object]] = field(default_factory=list)


class BankStatements:
    """Statements read as the SEPA rail's objects for a reconciliation (a RailReader)."""

    rails: tuple[str, ...] = SEPA_RAILS

    def __init__(self, source: str, statements: Sequence[Statement]) -> None:
        self.source = source[:64]
        self.statements = sorted(statements, key=_order)
        self.tally = Tally(statements=len(statements))
        self.charges: list[RailCharge] = []
        self.objects = self._objects()

    @classmethod
    def open(cls, path: Path) -> BankStatements:
        """A camt.053 file (001.02 or 001.08); StatementUnreadable if it cannot be read."""
        try:
            report = read_camt053(path.read_bytes())
        except OSError as e:
            raise StatementUnreadable(None, f"{path} cannot be read: {e}") from e
        except SepaFileError as e:
            raise StatementUnreadable(None, f"{path}: {e.reason}") from e
        return cls(f"statement:{path.name}", report.statements)

    @classmethod
    async def from_bank(cls, bank: Bank) -> BankStatements:
        """Every statement the bank has delivered."""
        statements: list[Statement] = []
        after: str | None = None
        while (page := await bank.reports(after=after, kind="camt.053")).items:
            for item in page.items:
                data = await bank.report(str(item["report_id"]))
                try:
                    statements += read_camt053(data).statements
                except SepaFileError as e:
                    raise StatementUnreadable(None, f"{item['report_id']}: {e.reason}") from e
            after = page.next
        return cls(f"bank:{bank.base_url}", statements)

    def window(self) -> Window:
        """From the first statement's day to the day after the last one's."""
        days = [s.opening.day for s in self.statements] + [s.closing.day for s in self.statements]
        if not days:
            raise StatementUnreadable(None, "no statement to reconcile against")
        start = datetime.combine(min(days), time(), UTC)
        end = datetime.combine(max(days), time(), UTC) + timedelta(days=1)
        return Window(RunKind.STATEMENT, start, end)

    def rows_read(self, objects: int) -> int:
        """The entries the statements held."""
        return self.tally.entries

    async def pages(self, start: int, end: int) -> AsyncIterator[list[RailObject]]:
        """Every debit object (the window is the statements' own)."""
        found = sorted(self.objects.values(), key=lambda o: (o.created, o.object_id))
        for i in range(0, len(found), PAGE):
            yield found[i : i + PAGE]

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The debit objects with these ids."""
        return [self.objects[i] for i in object_ids if i in self.objects]

    async def aclose(self) -> None:
        return None

    def gaps(self) -> list[Break]:
        """Each statement that does not follow the one before it on its account, and each
        whose closing balance is not its opening plus its booked entries."""
        found: list[Break] = []
        last: dict[str, Statement] = {}
        for st in self.statements:
            before = last.get(st.account_iban)
            if before is not None:
                found += _gaps_between(before, st)
            last[st.account_iban] = st
            off = balance_gap(st)
            if off:
                found.append(_statement_break(BreakType.BALANCE_MISMATCH, st, "closing", off))
        return found

    def _objects(self) -> dict[str, RailObject]:
        debits: dict[str, RailObject] = {}
        returned: Counter[str] = Counter()
        for st in self.statements:
            self.tally.balances.append(_balances(st))
            for at, entry in enumerate(st.entries):
                self.tally.entries += 1
                self.tally.transactions += len(entry.transactions)
                if entry.status is not EntryStatus.BOOKED or entry.reversal:
                    continue
                if entry.code is not None and entry.code.subfamily == CHARGES:
                    self._charge(st, at, entry)
                    continue
                alone = len(entry.transactions) == 1
                for tx in entry.transactions:
                    amount = tx.amount if tx.amount is not None else (entry.amount if alone else 0)
                    if tx.end_to_end_id is None:
                        continue
                    if entry.direction is CreditDebit.CREDIT and tx.return_reason is not None:
                        returned[tx.end_to_end_id] += amount
                    elif entry.direction is CreditDebit.DEBIT:
                        day = entry.booking_date or st.closing.day
                        obj = _debit(tx.end_to_end_id, amount, entry.currency, day)
                        name = obj.object_id
                        if name in debits:
                            name = f"{name}/{entry.servicer_reference or len(debits)}"
                        debits[name] = obj._replace(object_id=name)
        return {
            name: obj._replace(amount_reversed=min(obj.amount, returned[_e2e(name)]))
            for name, obj in debits.items()
        }

    def _charge(self, st: Statement, at: int, entry: Entry) -> None:
        self.tally.charges += entry.amount
        if entry.direction is not CreditDebit.DEBIT:
            return  # a charge refunded: the bank's credit, not settle's cost
        charged = {tx.end_to_end_id for tx in entry.transactions} - {None}
        reference = entry.servicer_reference or entry.reference
        self.charges.append(
            RailCharge(
                rail=SEPA_RAILS[0],
                reference=reference or f"{st.account_iban}:{st.statement_id}:{at}",
                amount=entry.amount,
                currency=entry.currency,
                charged_on=entry.booking_date or st.closing.day,
                end_to_end_id=charged.pop() if len(charged) == 1 else None,
            )
        )


def _debit(end_to_end_id: str, amount: int, currency: str, day: date) -> RailObject:
    return RailObject(
        object_id=end_to_end_id,
        kind=PayoutMethod.TRANSFER,
        amount=amount,
        amount_reversed=0,
        currency=currency,
        destination=None,  # few statements name the payee's account; the IBAN is not matched
        status=None,
        created=int(datetime.combine(day, time(), UTC).timestamp()),
        settlement_id=settlement_of(end_to_end_id),
    )


def _e2e(object_id: str) -> str:
    return object_id.partition("/")[0]


def _order(st: Statement) -> tuple[str, int, int, date]:
    return (st.account_iban, st.electronic_sequence or 0, st.legal_sequence or 0, st.closing.day)


def _gaps_between(before: Statement, after: Statement) -> list[Break]:
    found = []
    if (
        before.electronic_sequence is not None
        and after.electronic_sequence is not None
        and after.electronic_sequence != before.electronic_sequence + 1
    ):
        found.append(
            _statement_break(
                BreakType.STATEMENT_GAP,
                after,
                "electronic_sequence",
                after.electronic_sequence - before.electronic_sequence - 1,
                expected=before.electronic_sequence + 1,
                actual=after.electronic_sequence,
            )
        )
    restarted = after.closing.day.year > before.closing.day.year and after.legal_sequence == 1
    if (
        before.legal_sequence is not None
        and after.legal_sequence is not None
        and after.legal_sequence != before.legal_sequence + 1
        and not restarted
    ):
        found.append(
            _statement_break(
                BreakType.STATEMENT_GAP,
                after,
                "legal_sequence",
                after.legal_sequence - before.legal_sequence - 1,
                expected=before.legal_sequence + 1,
                actual=after.legal_sequence,
            )
        )
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


def _balances(st: Statement) -> dict[str, object]:
    return {
        "statement": st.statement_id,
        "account": st.account_iban,
        "electronic_sequence": st.electronic_sequence,
        "legal_sequence": st.legal_sequence,
        "opening": st.opening.signed,
        "closing": st.closing.signed,
        "currency": st.currency,
        "day": st.closing.day.isoformat(),
    }
