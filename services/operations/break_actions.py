"""The operator actions on a reconciliation break beyond `resolve` (actions.py registers
them all in `ACTIONS`), each read strictly from its request:

    action     payload                                        reason    in two-person mode
    write_off  {} (its amount is the break's; none is typed)  required  proposed
    adjust     {"account": "rail_fees|write_offs|suspense",   required  proposed
                "direction": "debit|credit",
                "amount": <whole minor units > 0: 100, 100.0>,
                "currency": "EUR"}
    correct    {"as": "reversed|failed|paid"}                 required  proposed
    match      {"settlement_id": "<uuid>"}                    required  proposed
    assign     {"assignee": "<operator>" | null}              -         done at once
    comment    {"text": "..."}                                -         done at once
    reopen     {}                                             required  done at once

How each is done: write_offs.py, corrections.py, break_notes.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import asyncpg

from services.domain.break_work import UNCHECKED, BreakAction, Correction, Direction
from services.domain.money import MAX_SETTLEMENT_AMOUNT, is_currency
from services.domain.postings import PlatformAccount
from services.operations import break_notes, corrections, review, write_offs
from services.operations.action_base import Action, Doing, Operator, operator_of, required
from services.operations.break_rules import applicable
from services.operations.breaks import show_break
from services.operations.errors import BadRequest, NotFound
from services.operations.query import one_of, storable
from services.operations.rail_lookup import RailLookup

MAX_NAME = 128


def text_of(value: object, name: str, longest: int) -> str:
    """`value` as non-blank text of at most `longest` characters, without NUL; BadRequest
    otherwise."""
    if not isinstance(value, str) or not value.strip() or len(value) > longest:
        raise BadRequest(
            f"{name} must be text of 1 to {longest} characters", code=f"invalid_{name}", field=name
        )
    if not storable(value):
        raise BadRequest(f"{name} must be text without NUL", code=f"invalid_{name}", field=name)
    return value


def whole_amount(value: object) -> int | None:
    """`value` as a whole count of minor units, 1 to MAX_SETTLEMENT_AMOUNT, read as the ledger
    reads an amount (100, 100.0 and 1e2 are all 100; a JSON body's fractions are Decimals);
    None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    if isinstance(value, Decimal) and not value.is_finite():
        return None
    # Range first: it bounds the number before any arithmetic on a huge exponent.
    if not 0 < value <= MAX_SETTLEMENT_AMOUNT or value != int(value):
        return None
    return int(value)


class _OnABreak:
    """What every action on a break shares: its target, checked against the break now."""

    action: BreakAction

    @property
    def checked(self) -> bool:
        """Whether two-person mode holds the action for a second operator."""
        return self.action not in UNCHECKED

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        return applicable(self.action, (await show_break(conn, item)).item)


class WriteOff(_OnABreak):
    """An open break's own amount booked to the platform's loss account; the break resolved."""

    action = BreakAction.WRITE_OFF

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        if payload:  # an amount typed by hand would be ignored: say so rather than book another
            given = sorted(payload)
            raise BadRequest(
                f"a write-off takes its amount from the break; drop {', '.join(given)}",
                code="amount_from_break",
                field=given[0],
            )
        return {}, required(reason)

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        return await write_offs.write_off(conn, doing.item, operator_of(doing))


class Adjust(_OnABreak):
    """The operator's amount booked between the platform's funding and one of its accounts."""

    action = BreakAction.ADJUST

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        account = one_of(PlatformAccount, payload.get("account"), "account", "unknown_account")
        direction = one_of(Direction, payload.get("direction"), "direction")
        amount = whole_amount(payload.get("amount"))
        if amount is None:
            raise BadRequest(
                f"amount must be a whole number of minor units, 1 to {MAX_SETTLEMENT_AMOUNT}",
                code="invalid_amount",
                field="amount",
            )
        currency = payload.get("currency")
        if not isinstance(currency, str) or not is_currency(currency):
            raise BadRequest(
                "currency must be an ISO 4217 code", code="invalid_currency", field="currency"
            )
        kept = {
            "account": account.value,
            "direction": direction.value,
            "amount": amount,
            "currency": currency,
        }
        return kept, required(reason)

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        p = doing.payload
        asked = write_offs.Adjustment(
            PlatformAccount(p["account"]), Direction(p["direction"]), p["amount"], p["currency"]
        )
        return await write_offs.adjust(conn, doing.item, asked, operator_of(doing))


class Correct(_OnABreak):
    """The break's settlement moved where the rail shows it is; the break resolved."""

    action = BreakAction.CORRECT

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        return {"as": str(one_of(Correction, payload.get("as"), "as"))}, required(reason)

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        correction = Correction(doing.payload["as"])
        return await corrections.correct(conn, lookup, doing.item, correction, operator_of(doing))


class Match(_OnABreak):
    """The break's unknown rail object recorded as a settlement's reference; resolved."""

    action = BreakAction.MATCH

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        given = payload.get("settlement_id")
        try:
            settlement = review.parse_id(given if isinstance(given, str) else "")
        except NotFound:
            raise BadRequest(
                "settlement_id must be a settlement's UUID",
                code="invalid_settlement_id",
                field="settlement_id",
            ) from None
        return {"settlement_id": str(settlement)}, required(reason)

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        sid = doing.payload["settlement_id"]
        return await corrections.match(conn, lookup, doing.item, sid, operator_of(doing))


class Assign(_OnABreak):
    """Who works on an open break (null: nobody)."""

    action = BreakAction.ASSIGN

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        if "assignee" not in payload:
            raise BadRequest(
                'say who: "assignee" (null: nobody)', code="invalid_assignee", field="assignee"
            )
        given = payload["assignee"]
        assignee = None if given is None else text_of(given, "assignee", MAX_NAME).strip()
        return {"assignee": assignee}, reason if reason and reason.strip() else None

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        by = Operator(doing.operator, doing.reason or "", doing.now)
        return await break_notes.assign(conn, doing.item, doing.payload["assignee"], by)


class Comment(_OnABreak):
    """A note on a break of any status."""

    action = BreakAction.COMMENT

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        return {"text": text_of(payload.get("text"), "text", break_notes.MAX_COMMENT)}, None

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        by = Operator(doing.operator, "", doing.now)
        return await break_notes.comment(conn, doing.item, doing.payload["text"], by)


class Reopen(_OnABreak):
    """A resolved break back to open, with the reason."""

    action = BreakAction.REOPEN

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        return {}, required(reason)

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        return await break_notes.reopen(conn, doing.item, operator_of(doing))


BREAK_ACTIONS: dict[BreakAction, Action] = {
    BreakAction.WRITE_OFF: WriteOff(),
    BreakAction.ADJUST: Adjust(),
    BreakAction.CORRECT: Correct(),
    BreakAction.MATCH: Match(),
    BreakAction.ASSIGN: Assign(),
    BreakAction.COMMENT: Comment(),
    BreakAction.REOPEN: Reopen(),
}
