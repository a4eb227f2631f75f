"""The rail simulator's state machine: objects, idempotency, effects and faults, without I/O.

Every public method takes the lock, so concurrent requests under one key cannot both create.
Time comes only from the clock; delayed changes (payout paid/failed, reversals) are timers
applied whenever the core is next touched, so no thread or event loop is needed to drive it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable

from railsim.aftermath import after_creation
from railsim.announce import Withheld
from railsim.balance import BalanceBook
from railsim.clock import Clock, SystemClock
from railsim.creation import make, refusal
from railsim.effects import Effects
from railsim.errors import ApiError
from railsim.faults import Dice, Faults
from railsim.idempotency import IdempotencyStore, Stored, fingerprint, replay
from railsim.listing import BALANCE_TRANSACTION_FILTERS, OBJECT_FILTERS, Ordered, R, page
from railsim.objects import Payout, Transfer, Wire, json_bytes, new_id
from railsim.params import Kind, create_request, decode
from railsim.replies import Delivery, Reply, api_error, error_reply
from railsim.timers import Rail, Timers, apply_due

Pairs = Iterable[tuple[str, str]]
MAX_KEY_LENGTH = 255
_CLASSES: dict[Kind, type[Transfer | Payout]] = {Kind.TRANSFER: Transfer, Kind.PAYOUT: Payout}


class RailSim:
    """A stateful fake of Stripe's transfers, payouts and balance; the ground truth for effects."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        faults: Faults | None = None,
        idempotency_window: float = 86400.0,
        outbox_limit: int = 10_000,
    ) -> None:
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._initial_faults = faults or Faults()
        self._faults = self._initial_faults
        self._dice = Dice(self._faults.seed)
        self._keys = IdempotencyStore(idempotency_window)
        self._objects: dict[str, Transfer | Payout] = {}
        self._listed: dict[Kind, Ordered[Transfer | Payout]] = {k: Ordered() for k in Kind}
        self._effects = Effects()
        self._timers = Timers()
        self._book = BalanceBook()
        self._withheld = Withheld(outbox_limit)
        self._outbox_limit = outbox_limit
        self._outbox: deque[Delivery] = deque(maxlen=outbox_limit)

    @property
    def faults(self) -> Faults:
        """The fault settings in force."""
        return self._faults

    def set_faults(self, faults: Faults) -> None:
        """Put `faults` in force; a new seed restarts the dice."""
        with self._lock:
            if faults.seed != self._faults.seed:
                self._dice = Dice(faults.seed)
            self._faults = faults

    def reset(self) -> None:
        """Forget every object, key, effect and pending change; restore the starting faults."""
        with self._lock:
            self._faults = self._initial_faults
            self._dice = Dice(self._faults.seed)
            self._keys.clear()
            self._objects.clear()
            self._listed = {k: Ordered() for k in Kind}
            self._effects = Effects()
            self._timers = Timers()
            self._book = BalanceBook()
            self._withheld = Withheld(self._outbox_limit)
            self._outbox.clear()

    def create(self, kind: Kind, pairs: Pairs, idempotency_key: str | None = None) -> Reply:
        """POST /v1/transfers or /v1/payouts with form `pairs`, under Stripe's key rules."""
        pairs = list(pairs)
        request_id = new_id("req")
        with self._lock:
            now = self._advance()
            subject = dict(pairs).get("metadata[settlement_id]") or idempotency_key or "-"
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            try:
                key = self._usable_key(idempotency_key)
                fp = fingerprint("POST", f"/v1/{kind}", pairs) if key else ""
                stored = self._keys.find(key, now) if key else None
                if stored is not None:
                    return replay(stored, fp, idempotency_key or "")
                request = create_request(kind, decode(pairs))
            except ApiError as e:
                return error_reply(e, request_id)
            refused = refusal(request, subject, self._faults, self._dice)
            wire: Wire | None = None
            if refused is not None:
                reply = error_reply(refused, request_id)
            else:
                obj = make(request, subject, now, self._rail())
                self._objects[obj.id] = obj
                self._listed[kind].add(obj.id, obj)
                self._effects.count(kind, request.settlement_id)
                wire = obj.to_wire()  # rendered once for the answer and its event
                reply = Reply(200, json_bytes(wire), request_id, created_id=obj.id)
            # Stripe keeps refusals too: the endpoint ran, so the same key gets the same no
            if key:
                self._keys.remember(key, Stored(fp, reply, now))
            if wire is None:
                return reply
            return after_creation(
                reply, wire, subject, idempotency_key, now, self._faults, self._dice, self._withheld
            )

    def seed(self, objects: Iterable[Transfer | Payout]) -> None:
        """Take `objects` as made at the rail, oldest first, sending no webhook (a bulk seed)."""
        with self._lock:
            for obj in objects:
                kind = Kind.TRANSFER if isinstance(obj, Transfer) else Kind.PAYOUT
                self._objects[obj.id] = obj
                self._listed[kind].add(obj.id, obj)
                self._effects.count(kind, obj.metadata.get("settlement_id"))

    def retrieve(self, kind: Kind, object_id: str) -> Reply:
        """GET /v1/<kind>/<id>: the object as it is now, or 404 resource_missing."""

        def found() -> Wire | None:
            obj = self._objects.get(object_id)
            return obj.to_wire() if isinstance(obj, _CLASSES[kind]) else None

        return self._one(object_id, f"No such {kind.removesuffix('s')}: '{object_id}'", found)

    def list_objects(self, kind: Kind, pairs: Pairs) -> Reply:
        """GET /v1/<kind>: a Stripe list object, newest first, filtered and paged by `pairs`."""
        return self._list(
            f"/v1/{kind}",
            OBJECT_FILTERS[kind],
            self._listed[kind],
            pairs,
            lambda o, key: getattr(o, key, None),
            lambda o: o.to_wire(),
        )

    def list_balance_transactions(self, pairs: Pairs) -> Reply:
        """GET /v1/balance_transactions: every movement of the balance, newest first, paged."""
        return self._list(
            "/v1/balance_transactions",
            BALANCE_TRANSACTION_FILTERS,
            self._book.transactions,
            pairs,
            lambda t, key: t.get(key),
            lambda t: t,
        )

    def retrieve_balance_transaction(self, transaction_id: str) -> Reply:
        """GET /v1/balance_transactions/<id>: one movement, or 404 resource_missing."""
        missing = f"No such balance transaction: '{transaction_id}'"
        return self._one(transaction_id, missing, lambda: self._book.find(transaction_id))

    def balance(self) -> Reply:
        """GET /v1/balance: what every movement so far adds up to, per currency."""
        return self._one("balance", "", self._book.balance)

    def statement(self, start: int, end: int) -> str:
        """The statement (Stripe's itemized balance change report, CSV) of [start, end)."""
        with self._lock:
            return self._book.itemized(self._objects, start, end)

    def withheld_webhooks(self) -> Wire:
        """Events the webhook_drop fault never sent: {"count": n, "recent": [...]}."""
        with self._lock:
            self._advance()
            return {"count": self._withheld.count, "recent": self._withheld.recent()}

    def effects(self, offset: int = 0, limit: int | None = None) -> Wire:
        """Objects created per metadata settlement id ({"by_settlement", "total"}), or a page."""
        with self._lock:
            return self._effects.summary(offset, limit)

    def faults_met(self, settlement_ids: Iterable[str]) -> dict[str, list[str]]:
        """The faults that fired for each settlement since the dice last started; settlements
        that met none are left out."""
        with self._lock:
            return self._dice.met(settlement_ids)

    def effects_for(self, settlement_id: str) -> dict[str, int]:
        """How many transfers and payouts were created for one settlement."""
        with self._lock:
            return self._effects.of(settlement_id)

    def objects_for(self, settlement_id: str) -> list[Wire]:
        """Every object whose metadata names `settlement_id`, newest first."""
        with self._lock:
            self._advance()
            objects = reversed(self._objects.values())
            return [
                o.to_wire() for o in objects if o.metadata.get("settlement_id") == settlement_id
            ]

    def queue_webhooks(self, deliveries: Iterable[Delivery]) -> None:
        """Put deliveries in the outbox, for callers that will not post them themselves."""
        with self._lock:
            self._outbox.extend(deliveries)

    def take_webhooks(self) -> list[Delivery]:
        """Apply due changes and hand over every delivery waiting in the outbox."""
        with self._lock:
            self._advance()
            taken = list(self._outbox)
            self._outbox.clear()
            return taken

    def _list(
        self,
        url: str,
        filters: frozenset[str],
        ordered: Ordered[R],
        pairs: Pairs,
        read: Callable[[R, str], object],
        wire: Callable[[R], Wire],
    ) -> Reply:
        pairs = list(pairs)
        request_id = new_id("req")
        with self._lock:
            self._advance()
            subject = f"list:{url.removeprefix('/v1/')}:{sorted(pairs)}"
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            try:
                listed = page(url, filters, ordered, decode(pairs), read=read, wire=wire)
            except ApiError as e:
                return error_reply(e, request_id)
            return Reply(200, json_bytes(listed), request_id)

    def _one(self, subject: str, missing: str, found: Callable[[], Wire | None]) -> Reply:
        """One object read under the lock, or Stripe's 404 with the message `missing`."""
        request_id = new_id("req")
        with self._lock:
            self._advance()
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            obj = found()
            if obj is None:
                error = ApiError(missing, status=404, code="resource_missing", param="id")
                return error_reply(error, request_id)
            return Reply(200, json_bytes(obj), request_id)

    def _rail(self) -> Rail:
        return Rail(
            self._objects, self._timers, self._book, self._faults, self._dice, self._withheld
        )

    def _advance(self) -> float:
        now = self.clock.now()
        self._outbox.extend(apply_due(self._rail(), now))
        return now

    def _usable_key(self, key: str | None) -> str | None:
        if key is not None and len(key) > MAX_KEY_LENGTH:
            raise ApiError(
                f"Idempotency keys are limited to {MAX_KEY_LENGTH} characters.",
                code="idempotency_key_too_long",
                param="Idempotency-Key",
            )
        # A rail that ignores keys is simulated by never looking them up
        return key if key and self._keys.enabled else None
