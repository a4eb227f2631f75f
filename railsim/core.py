"""The rail simulator's state machine: objects, idempotency, effects, faults, the account's
own activity and its reports, without I/O (but for the journal, given a data directory).

Every public method takes the lock (guard.py), so concurrent requests under one key cannot
both create. Time comes only from the clock; delayed changes are applied whenever the core
is next touched. The reads are in reads.py, the Reporting API in report_calls.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from railsim.aftermath import after_creation
from railsim.creation import make, refusal
from railsim.errors import ApiError
from railsim.faults import Dice, Faults
from railsim.guard import Pairs
from railsim.idempotency import Stored, fingerprint, replay
from railsim.objects import Payout, Transfer, Wire, json_bytes, new_id
from railsim.params import Kind, create_request, decode
from railsim.reads import Reads
from railsim.replies import Delivery, Reply, api_error, error_reply
from railsim.report_calls import ReportCalls

MAX_KEY_LENGTH = 255
__all__ = ["MAX_KEY_LENGTH", "Pairs", "RailSim"]


class RailSim(Reads, ReportCalls):
    """A stateful fake of Stripe's transfers, payouts, charges, balance and reports; the
    ground truth for effects."""

    @property
    def faults(self) -> Faults:
        """The fault settings in force."""
        return self._faults

    def set_faults(self, faults: Faults) -> None:
        """Put `faults` in force; a new seed restarts the dice."""
        with self._locked():
            if faults.seed != self._faults.seed:
                self._dice = Dice(faults.seed)
            self._faults = faults

    def reset(self) -> None:
        """Forget every object, key, effect, run and pending change (the journal too); restore
        the starting faults."""
        with self._locked():
            self._faults = self._initial_faults
            self._dice = Dice(self._faults.seed)
            self._journal.restart()
            self._state.files.clear()
            self._state = self._opened([])

    def close(self) -> None:
        """Write what the journal holds and let go of its file."""
        with self._locked():
            self._journal.close()

    def create(self, kind: Kind, pairs: Pairs, idempotency_key: str | None = None) -> Reply:
        """POST /v1/transfers or /v1/payouts with form `pairs`, under Stripe's key rules."""
        pairs = list(pairs)
        request_id = new_id("req")
        with self._locked():
            now = self._advance()
            subject = dict(pairs).get("metadata[settlement_id]") or idempotency_key or "-"
            if self._dice.chance("fail_before", subject, self._faults.fail_before):
                return api_error(request_id)
            try:
                key = self._usable_key(idempotency_key)
                fp = fingerprint("POST", f"/v1/{kind}", pairs) if key else ""
                stored = self._state.keys.find(key, now) if key else None
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
                self._state.keep(obj, api=True)
                wire = obj.to_wire()  # rendered once for the answer and its event
                reply = Reply(200, json_bytes(wire), request_id, created_id=obj.id)
            # Stripe keeps refusals too: the endpoint ran, so the same key gets the same no
            if key:
                self._state.remember(key, Stored(fp, reply, now))
            if wire is None:
                return reply
            return after_creation(
                reply,
                wire,
                subject,
                idempotency_key,
                now,
                self._faults,
                self._dice,
                self._state.withheld,
            )

    def seed(self, objects: Iterable[Transfer | Payout]) -> None:
        """Take `objects` as made at the rail, oldest first, sending no webhook (a bulk seed)."""
        with self._locked():
            for obj in objects:
                self._state.keep(obj, api=True)

    def queue_webhooks(self, deliveries: Iterable[Delivery]) -> None:
        """Put deliveries in the outbox, for callers that will not post them themselves."""
        with self._locked():
            self._state.outbox.extend(deliveries)

    def take_webhooks(self) -> list[Delivery]:
        """Apply due changes and hand over every delivery waiting in the outbox."""
        with self._locked():
            self._advance()
            taken = list(self._state.outbox)
            self._state.outbox.clear()
            return taken

    def _usable_key(self, key: str | None) -> str | None:
        if key is not None and len(key) > MAX_KEY_LENGTH:
            raise ApiError(
                f"Idempotency keys are limited to {MAX_KEY_LENGTH} characters.",
                code="idempotency_key_too_long",
                param="Idempotency-Key",
            )
        # A rail that ignores keys is simulated by never looking them up
        return key if key and self._state.keys.enabled else None
