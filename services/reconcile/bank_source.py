"""The SEPA rail's side of a reconciliation: the bank's camt.053 statements, and its camt.054
notifications of the days no statement covers yet, read as the rail's objects.

Each booked debit of a transfer is one object, named by its EndToEndId (a second debit of
the same EndToEndId is another object naming the same settlement: `duplicate_at_rail`); a
batch entry gives one object per transaction of its TxDtls (1:N). A return (a booked credit,
PMNT/ICDT/RRTN) counts against the debit it names by its original EndToEndId, as the amount
reversed. A debit whose EndToEndId names no settlement of settle's is an object without one:
`unknown_at_rail`, under that EndToEndId. Charges (BkTxCd CHRG) are no transfer: each booked
charge debit of a statement is a RailCharge, under the bank's reference for the entry, that
the run books to the platform's rail fees account (services/settlement/rail_charges.py).

A statement is the day's last word; a notification says the same of a booking as it happens.
A notification's entries count only for a day after its account's last statement (the
statement of that day, once it comes, replaces them), each once by the bank's reference.
`booked_through` is the last business day a statement closed: a transfer due after it is
pending (the bank may book it later that day), not missing.
Entries, transactions, charges and balances read are counted for the report.

The statements' own gaps and sums are bank_continuity.py's. A file is read whole or not at
all: it is refused (StatementUnreadable) if any of it cannot be read.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import TypeVar

from services.adapters.sepa.bank import Bank
from services.adapters.sepa.camt053 import Statement, read_camt053
from services.adapters.sepa.camt054 import Notification, read_camt054
from services.adapters.sepa.camt_entries import CreditDebit, Entry, EntryStatus
from services.adapters.sepa.errors import SepaFileError
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import Break, RailObject, RunKind
from services.domain.sepa import settlement_of
from services.reconcile.bank_continuity import statement_gaps
from services.reconcile.errors import StatementUnreadable
from services.reconcile.windows import Window
from services.settlement.rail_charges import RailCharge

CHARGES = "CHRG"
PAGE = 1000
SEPA_RAILS: tuple[str, ...] = ("sepa",)
_Report = TypeVar("_Report")


@dataclass
class Tally:
    """What was read, for the run's report: per source, entries and transactions, charges,
    and the balances found."""

    statements: int = 0
    notifications: int = 0  # camt.054 notifications of days no statement covers yet, read
    entries: int = 0
    transactions: int = 0
    charges: int = 0  # minor units of the charge entries
    charges_booked: int = 0  # how many charge entries this run booked (the rest were before)
    balances: list[dict[str, object]] = field(default_factory=list)


class BankStatements:
    """Statements read as the SEPA rail's objects for a reconciliation (a RailReader)."""

    rails: tuple[str, ...] = SEPA_RAILS

    def __init__(
        self,
        source: str,
        statements: Sequence[Statement],
        notifications: Sequence[Notification] = (),
        *,
        live: bool = False,
    ) -> None:
        self.source = source[:64]
        self.live = live  # read from the bank itself (else a file from anywhere)
        self.statements = sorted(statements, key=_order)
        self.notified = list(notifications)
        self.tally = Tally(statements=len(statements), notifications=len(self.notified))
        self.charges: list[RailCharge] = []
        self._covered = {st.account_iban: st.closing.day for st in self.statements}
        self._notified = self._notified_entries()
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
        """Every statement the bank has delivered, and its notifications."""
        statements: list[Statement] = []
        notifications: list[Notification] = []
        async for report_id, data in _reports(bank, "camt.053"):
            statements += _read(report_id, read_camt053, data).statements
        async for report_id, data in _reports(bank, "camt.054"):
            notifications += _read(report_id, read_camt054, data).notifications
        return cls(f"bank:{bank.base_url}", statements, notifications, live=True)

    def booked_through(self) -> date | None:
        """The last business day a statement closed on every account read (the bank may
        still book more on a day only notified so far)."""
        return min(self._covered.values(), default=None)

    def window(self, now: datetime) -> Window:
        """From the first day read to the day after the last one; read from the bank, to
        `now` if later: a settlement sent after the records' last day is compared too
        (pending until its booking date has a statement)."""
        days = [s.opening.day for s in self.statements] + [s.closing.day for s in self.statements]
        days += [day for day, _ in self._notified]
        if not days:
            raise StatementUnreadable(None, "no statement to reconcile against")
        start = datetime.combine(min(days), time(), UTC)
        end = datetime.combine(max(days), time(), UTC) + timedelta(days=1)
        return Window(RunKind.STATEMENT, start, max(end, now) if self.live else end)

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
        """The statements' own breaks: see bank_continuity.py."""
        return statement_gaps(self.statements)

    def _objects(self) -> dict[str, RailObject]:
        debits: dict[str, RailObject] = {}
        returned: Counter[str] = Counter()
        for st in self.statements:
            self.tally.balances.append(_balances(st))
            for at, entry in enumerate(st.entries):
                if _is_charge(entry) and entry.status is EntryStatus.BOOKED and not entry.reversal:
                    self._charge(st, at, entry)
                self._take(entry, entry.booking_date or st.closing.day, debits, returned)
        for day, entry in self._notified:
            self._take(entry, day, debits, returned)
        return {
            name: obj._replace(amount_reversed=min(obj.amount, returned[_e2e(name)]))
            for name, obj in debits.items()
        }

    def _notified_entries(self) -> list[tuple[date, Entry]]:
        """Each entry of the notifications dated after its account's last statement, with
        its day, once per bank reference."""
        found: dict[str, tuple[date, Entry]] = {}
        for n in self.notified:
            for at, entry in enumerate(n.entries):
                day = entry.booking_date
                covered = self._covered.get(n.account_iban)
                if day is None or (covered is not None and day <= covered):
                    continue
                ref = entry.servicer_reference or f"{n.notification_id}:{at}"
                found.setdefault(f"{n.account_iban}:{ref}", (day, entry))
        return list(found.values())

    def _take(
        self, entry: Entry, day: date, debits: dict[str, RailObject], returned: Counter[str]
    ) -> None:
        """A booked entry's debits (as objects) and returns (against the debits they name)."""
        self.tally.entries += 1
        self.tally.transactions += len(entry.transactions)
        if entry.status is not EntryStatus.BOOKED or entry.reversal or _is_charge(entry):
            return
        alone = len(entry.transactions) == 1
        for tx in entry.transactions:
            amount = tx.amount if tx.amount is not None else (entry.amount if alone else 0)
            if tx.end_to_end_id is None:
                continue
            if entry.direction is CreditDebit.CREDIT and tx.return_reason is not None:
                returned[tx.end_to_end_id] += amount
            elif entry.direction is CreditDebit.DEBIT:
                obj = _debit(tx.end_to_end_id, amount, entry.currency, day)
                name = obj.object_id
                if name in debits:
                    name = f"{name}/{entry.servicer_reference or len(debits)}"
                debits[name] = obj._replace(object_id=name)

    def _charge(self, st: Statement, at: int, entry: Entry) -> None:
        self.tally.charges += entry.amount
        if entry.direction is not CreditDebit.DEBIT or entry.amount <= 0:
            return  # a charge refunded (the bank's credit, not settle's cost), or nothing
        charged = {tx.end_to_end_id for tx in entry.transactions} - {None}
        # The bank's own reference is unique on the account; an entry's own (NtryRef), or
        # its place, only within its statement.
        within = entry.reference or str(at)
        reference = entry.servicer_reference or f"{st.statement_id}:{within}"
        self.charges.append(
            RailCharge(
                rail=SEPA_RAILS[0],
                reference=f"{st.account_iban}:{reference}",
                amount=entry.amount,
                currency=entry.currency,
                charged_on=entry.booking_date or st.closing.day,
                end_to_end_id=charged.pop() if len(charged) == 1 else None,
            )
        )


def _is_charge(entry: Entry) -> bool:
    return entry.code is not None and entry.code.subfamily == CHARGES


async def _reports(bank: Bank, kind: str) -> AsyncIterator[tuple[str, bytes]]:
    """Each report of `kind` the bank has delivered: its id and its bytes."""
    async for item in bank.listed("reports", kind=kind):
        report_id = str(item["report_id"])
        yield report_id, await bank.report(report_id)


def _read(report_id: str, read: Callable[[bytes], _Report], data: bytes) -> _Report:
    """One report read whole, or StatementUnreadable naming it."""
    try:
        return read(data)
    except SepaFileError as e:
        raise StatementUnreadable(None, f"{report_id}: {e.reason}") from e


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
