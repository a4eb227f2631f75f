"""Stripe's form-encoded parameters: bracket notation decoded, create requests validated."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from railsim.errors import ApiError

Pairs = Iterable[tuple[str, str]]
Form = dict[str, str | dict[str, str]]

# A subset of the currencies Stripe settles in; enough to refuse a made-up code.
CURRENCIES = frozenset(
    {"aud", "bgn", "brl", "cad", "chf", "czk", "dkk", "eur", "gbp", "hkd", "huf"}
    | {"inr", "jpy", "mxn", "nok", "nzd", "pln", "ron", "sek", "sgd", "thb", "usd"}
)
MAX_AMOUNT = 99_999_999_999  # beyond this Stripe answers amount_too_large
_BRACKET = re.compile(r"^([a-z_]+)\[([^\[\]]*)\]$")


class Kind(StrEnum):
    """The two objects that move money, named as in their API path."""

    TRANSFER = "transfers"
    PAYOUT = "payouts"


_ALLOWED = {
    Kind.TRANSFER: frozenset(
        {"amount", "currency", "destination", "transfer_group", "description", "metadata"}
        | {"source_transaction", "source_type", "expand"}
    ),
    Kind.PAYOUT: frozenset(
        {"amount", "currency", "destination", "method", "description", "metadata"}
        | {"statement_descriptor", "source_type", "expand"}
    ),
}


@dataclass(frozen=True, slots=True)
class CreateRequest:
    """A valid request to create a transfer or payout."""

    kind: Kind
    amount: int  # minor units, > 0
    currency: str  # lower case, as Stripe returns it
    destination: str | None  # required for transfers; a payout may use the default bank
    description: str | None = None
    transfer_group: str | None = None  # transfers only
    method: str = "standard"  # payouts only: standard or instant
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def settlement_id(self) -> str | None:
        """Our settlement id, which the relay sends in metadata."""
        return self.metadata.get("settlement_id")


def decode(pairs: Pairs) -> Form:
    """Fold `a[b]=c` pairs into nested dicts, one level deep, as Stripe's clients send them."""
    form: Form = {}
    for key, value in pairs:
        match = _BRACKET.match(key)
        if match is None:
            if "[" in key:
                raise ApiError(
                    f"Invalid parameter name: {key}", code="parameter_unknown", param=key
                )
            form[key] = value
            continue
        outer, inner = match.groups()
        nested = form.setdefault(outer, {})
        if not isinstance(nested, dict):
            raise ApiError(f"Invalid hash: {outer}", code="parameter_invalid_string", param=outer)
        nested[inner] = value
    return form


def create_request(kind: Kind, form: Form) -> CreateRequest:
    """The create request `form` asks for, or ApiError naming the first bad parameter."""
    for key in form:
        if key not in _ALLOWED[kind]:
            raise ApiError(
                f"Received unknown parameter: {key}", code="parameter_unknown", param=key
            )
    destination = _string(form, "destination")
    if kind is Kind.TRANSFER and destination is None:
        raise ApiError(
            "Missing required param: destination.", code="parameter_missing", param="destination"
        )
    method = _string(form, "method") or "standard"
    if method not in ("standard", "instant"):
        raise ApiError(f"Invalid method: {method}", code="parameter_invalid_string", param="method")
    return CreateRequest(
        kind=kind,
        amount=_amount(form),
        currency=_currency(form),
        destination=destination,
        description=_string(form, "description"),
        transfer_group=_string(form, "transfer_group"),
        method=method,
        metadata=_metadata(form),
    )


def _string(form: Form, key: str) -> str | None:
    value = form.get(key)
    if isinstance(value, dict):
        raise ApiError(f"Invalid string: {key}", code="parameter_invalid_string", param=key)
    return value or None


def _amount(form: Form) -> int:
    raw = _string(form, "amount")
    if raw is None:
        raise ApiError("Missing required param: amount.", code="parameter_missing", param="amount")
    # Stripe wants a plain integer of minor units: "10.50" and "1e3" are both refused
    if not raw.isascii() or not raw.isdigit() or int(raw) <= 0:
        raise ApiError(
            f"Invalid positive integer: {raw}", code="parameter_invalid_integer", param="amount"
        )
    if int(raw) > MAX_AMOUNT:
        raise ApiError(
            f"Amount must be no more than {MAX_AMOUNT}", code="amount_too_large", param="amount"
        )
    return int(raw)


def _currency(form: Form) -> str:
    raw = _string(form, "currency")
    if raw is None:
        raise ApiError(
            "Missing required param: currency.", code="parameter_missing", param="currency"
        )
    if raw.lower() not in CURRENCIES:
        raise ApiError(
            f"Invalid currency: {raw.lower()}.", code="parameter_invalid_string", param="currency"
        )
    return raw.lower()


def _metadata(form: Form) -> dict[str, str]:
    value = form.get("metadata", {})
    if not isinstance(value, dict):
        raise ApiError("Invalid hash: metadata", code="parameter_invalid_string", param="metadata")
    if len(value) > 50 or any(len(k) > 40 or len(v) > 500 for k, v in value.items()):
        raise ApiError(
            "Metadata is limited to 50 keys of 40 characters and values of 500 characters.",
            code="parameter_invalid_string",
            param="metadata",
        )
    return dict(value)
