"""Does a rail event describe the money a settlement sent? Pure rules, no I/O.

The relay creates every transfer and payout on the platform's own Stripe account (no
`Stripe-Account` header), with the settlement's amount, currency (lower case, as Stripe
expects) and destination: for a transfer the connected account (`acct_...`) that receives
it, for a payout the bank account or card it goes to. So an event about our money carries
an object with those same three values and no top-level `account`: Stripe sets `account`
only on an event that happened on a connected account's own books (a Connect endpoint
forwards those), which is that account's money even when its metadata names a settlement
of ours. Once the relay has recorded the rail's answer, the object must also be the one the
settlement went out as; and a reversal can never report more back than was sent.

An event that differs in any of these is a `mismatch`: never applied, kept with both sides
(`Difference`) for reconciliation and an operator, whatever its signature says.
"""

from __future__ import annotations

from typing import NamedTuple

Value = int | str | None


class Sent(NamedTuple):
    """What the settlement sent to the rail, as its row records it."""

    amount: int  # minor units
    currency: str  # ISO 4217, upper case
    destination: str  # the connected account (transfer) or bank account (payout) paid
    rail_reference: str | None  # the rail's id of what was sent; None until recorded


class Reported(NamedTuple):
    """What a rail event says about its object; None where the event carries no such value
    (or one of the wrong type: a string amount, a number as destination)."""

    object_id: str | None  # `data.object.id`: the transfer or payout
    amount: Value  # `data.object.amount`, minor units
    currency: Value  # `data.object.currency`, as Stripe writes it (lower case)
    destination: Value  # `data.object.destination`
    account: Value  # the event's `account`: set only on a connected account's own events
    amount_reversed: int | None = None  # come back in all, for a reversal (RailEvent)


class Difference(NamedTuple):
    """One field in which the event differs from the settlement: what was sent, what came."""

    field: str
    expected: Value
    received: Value


# The reported account of our own events: the platform's, which Stripe leaves out.
PLATFORM_ACCOUNT = None


def differences(sent: Sent, reported: Reported) -> tuple[Difference, ...]:
    """Every field in which `reported` differs from `sent`, in a fixed order; () when the
    event describes the money the settlement sent."""
    found: list[Difference] = []
    if sent.rail_reference is not None and reported.object_id != sent.rail_reference:
        found.append(Difference("object", sent.rail_reference, reported.object_id))
    if reported.amount != sent.amount or isinstance(reported.amount, bool):
        found.append(Difference("amount", sent.amount, reported.amount))
    if not (isinstance(reported.currency, str) and reported.currency.upper() == sent.currency):
        found.append(Difference("currency", sent.currency, reported.currency))
    if reported.destination != sent.destination:
        found.append(Difference("destination", sent.destination, reported.destination))
    if reported.account != PLATFORM_ACCOUNT:
        found.append(Difference("account", PLATFORM_ACCOUNT, reported.account))
    back = reported.amount_reversed
    if back is not None and back > sent.amount:
        # `expected` is the most that can come back: what was sent.
        found.append(Difference("amount_reversed", sent.amount, back))
    return tuple(found)


def describe(found: tuple[Difference, ...]) -> str:
    """One line for the inbox row's reason: each differing field with both sides."""
    parts = (f"{d.field} {d.received!r} (sent {d.expected!r})" for d in found)
    return "does not match what was sent: " + ", ".join(parts)
