"""The core's reads: objects, charges, the balance and its transactions, and its own books
(effects, withheld events, faults met) as the control endpoints show them."""

from __future__ import annotations

from collections.abc import Iterable

from railsim.guard import Guarded, Pairs
from railsim.listing import BALANCE_TRANSACTION_FILTERS, CHARGE_FILTERS, OBJECT_FILTERS
from railsim.objects import Charge, Payout, Transfer, Wire
from railsim.params import Kind
from railsim.replies import Reply

_CLASSES: dict[Kind, type[Transfer | Payout]] = {Kind.TRANSFER: Transfer, Kind.PAYOUT: Payout}


def _expands(pairs: list[tuple[str, str]], field: str) -> bool:
    """Whether the query asks to expand `field` (`expand[]=`, `expand[0]=`, as Stripe's
    libraries send it)."""
    return any(key.startswith("expand") and value == field for key, value in pairs)


class Reads(Guarded):
    """Everything read from the rail, each under the lock, due changes applied first."""

    def retrieve(self, kind: Kind, object_id: str) -> Reply:
        """GET /v1/<kind>/<id>: the object as it is now, or 404 resource_missing."""

        def found() -> Wire | None:
            obj = self._state.objects.get(object_id)
            return obj.to_wire() if isinstance(obj, _CLASSES[kind]) else None

        return self._one(object_id, f"No such {kind.removesuffix('s')}: '{object_id}'", found)

    def list_objects(self, kind: Kind, pairs: Pairs) -> Reply:
        """GET /v1/<kind>: a Stripe list object, newest first, filtered and paged by `pairs`."""
        return self._list(
            f"/v1/{kind}",
            OBJECT_FILTERS[kind],
            lambda: self._state.listed[kind],
            pairs,
            lambda o, key: getattr(o, key, None),
            lambda o: o.to_wire(),
        )

    def retrieve_charge(self, charge_id: str) -> Reply:
        """GET /v1/charges/<id>: a charge the account took, or 404 resource_missing."""

        def found() -> Wire | None:
            position = self._state.charges.position.get(charge_id)
            return None if position is None else self._state.charges.records[position].to_wire()

        return self._one(charge_id, f"No such charge: '{charge_id}'", found)

    def list_charges(self, pairs: Pairs) -> Reply:
        """GET /v1/charges: the account's charges, newest first, paged."""

        def read(charge: Charge, key: str) -> object:
            return getattr(charge, key, None)

        return self._list(
            "/v1/charges",
            CHARGE_FILTERS,
            lambda: self._state.charges,
            pairs,
            read,
            lambda c: c.to_wire(),
        )

    def list_balance_transactions(self, pairs: Pairs) -> Reply:
        """GET /v1/balance_transactions: every movement of the balance, newest first, paged;
        with `expand[]=data.source`, each with the object that caused it in `source`."""
        pairs = list(pairs)
        expand = _expands(pairs, "data.source")
        return self._list(
            "/v1/balance_transactions",
            BALANCE_TRANSACTION_FILTERS,
            lambda: self._state.book.transactions,
            pairs,
            lambda t, key: self._state.book.read(t, key),
            self._with_source if expand else lambda t: t,
        )

    def retrieve_balance_transaction(self, transaction_id: str, pairs: Pairs = ()) -> Reply:
        """GET /v1/balance_transactions/<id>: one movement (`expand[]=source`: with the object
        that caused it), or 404 resource_missing."""
        missing = f"No such balance transaction: '{transaction_id}'"
        expand = _expands(list(pairs), "source")

        def found() -> Wire | None:
            txn = self._state.book.find(transaction_id)
            return self._with_source(txn) if txn is not None and expand else txn

        return self._one(transaction_id, missing, found)

    def _with_source(self, txn: Wire) -> Wire:
        source = self._state.source(txn["source"])
        return txn if source is None else {**txn, "source": source}

    def balance(self) -> Reply:
        """GET /v1/balance: what every movement so far adds up to, per currency."""
        return self._one("balance", "", lambda: self._state.book.balance())

    def withheld_webhooks(self) -> Wire:
        """Events the webhook_drop fault never sent: {"count": n, "recent": [...]}."""
        with self._locked():
            self._advance()
            withheld = self._state.withheld
            return {"count": withheld.count, "recent": withheld.recent()}

    def effects(self, offset: int = 0, limit: int | None = None) -> Wire:
        """Objects created per metadata settlement id ({"by_settlement", "total"}), or a page."""
        with self._locked():
            return self._state.effects.summary(offset, limit)

    def faults_met(self, settlement_ids: Iterable[str]) -> dict[str, list[str]]:
        """The faults that fired for each settlement since the dice last started; settlements
        that met none are left out."""
        with self._locked():
            return self._dice.met(settlement_ids)

    def effects_for(self, settlement_id: str) -> dict[str, int]:
        """How many transfers and payouts were created for one settlement."""
        with self._locked():
            return self._state.effects.of(settlement_id)

    def objects_for(self, settlement_id: str) -> list[Wire]:
        """Every object whose metadata names `settlement_id`, newest first."""
        with self._locked():
            self._advance()
            objects = reversed(self._state.objects.values())
            return [
                o.to_wire() for o in objects if o.metadata.get("settlement_id") == settlement_id
            ]
