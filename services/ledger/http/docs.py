"""What /openapi.json says beyond the routes themselves: the request body and error shapes."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from services.domain.money import CURRENCIES, MAX_SETTLEMENT_AMOUNT
from services.ledger.intake import (
    MAX_KEY_CHARS,
    MAX_METADATA_KEY_CHARS,
    MAX_METADATA_KEYS,
    MAX_METADATA_VALUE_CHARS,
    MAX_TEXT_CHARS,
)
from services.platform.api_docs import error_entry

# The characters the intake refuses in text (C0, DEL, C1), and in metadata keys also [ and ].
_NO_CONTROLS = r"^[^\x00-\x1f\x7f-\x9f]*$"
_METADATA_KEY = r"^[^\x00-\x1f\x7f-\x9f\[\]]*$"
_Text = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS, pattern=_NO_CONTROLS)
]
# Spelt out: pydantic would put the key rule under patternProperties, which leaves other keys open.
_Metadata = Annotated[
    dict[str, str],
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": MAX_METADATA_KEYS,
            "propertyNames": {
                "minLength": 1,
                "maxLength": MAX_METADATA_KEY_CHARS,
                "pattern": _METADATA_KEY,
            },
            "additionalProperties": {
                "type": "string",
                "maxLength": MAX_METADATA_VALUE_CHARS,
                "pattern": _NO_CONTROLS,
            },
        }
    ),
]


class SettlementBody(BaseModel):
    """The body of POST /v1/settlements (validated by the ledger's intake, not by FastAPI).

    Unknown fields are refused; the tenant comes from the bearer token, never the body.
    """

    model_config = ConfigDict(extra="forbid", title="SettlementBody")

    reference: _Text = Field(description="Your unique payout id.")
    payee: _Text = Field(description="Who is paid.")
    destination: _Text = Field(description="The rail account.")
    amount: int = Field(
        gt=0,
        le=MAX_SETTLEMENT_AMOUNT,
        description="Minor units; 100 and 100.0 are equal, 100.5 invalid.",
    )
    currency: Annotated[str, WithJsonSchema({"type": "string", "enum": sorted(CURRENCIES)})] = (
        Field(description="An active ISO 4217 code, in upper case.")
    )
    rail: Literal["sim", "stripe", "sepa"] | None = Field(
        None,
        description=(
            "Omitted: the tenant's default rail for the currency, else the first rail here "
            "that pays it."
        ),
    )
    metadata: _Metadata = Field(
        default_factory=dict,
        description="Up to 50 pairs; keys 1..40 characters without [ ], values up to 500.",
    )


REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SettlementBody.model_json_schema()}},
    }
}

IDEMPOTENCY_KEY = (
    "Required: 1..255 printable ASCII characters, no space at either end. A retry with the "
    "same key and body replays the first response byte for byte; with another body it is "
    "refused with 422."
)
# What `intake.validate_idempotency_key` accepts, so a client can check a key before sending.
IDEMPOTENCY_KEY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_KEY_CHARS,
    "pattern": "^[!-~]([ -~]*[!-~])?$",
}

# Cursors are unpadded base64url (refused here otherwise, with FastAPI's 400 `invalid_cursor`),
# but which such strings are positions only the API knows: the document names each list's
# cursors as a `format` of their own, and any the list did not issue is refused with 400.
_CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"
CURSOR = "`next_cursor` of the last page of this list; any other is refused with 400."


def _cursor_schema(listing: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "format": f"{listing}-cursor"}


SettlementsCursor = Annotated[
    str,
    StringConstraints(min_length=1, pattern=_CURSOR_PATTERN),
    WithJsonSchema(_cursor_schema("settlements")),
]
EntriesCursor = Annotated[
    str,
    StringConstraints(min_length=1, pattern=_CURSOR_PATTERN),
    WithJsonSchema(_cursor_schema("entries")),
]

_REPLAYED = {
    "description": "`true` when this is the stored first response to the same key.",
    "schema": {"type": "string", "enum": ["true"]},
}


def errors(*statuses: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries in the error shape for `statuses` (and `s<N>=` texts)."""
    texts = {
        400: "Invalid input; `error.field` names it.",
        401: "Missing or unknown bearer token.",
        404: "No such resource for this tenant.",
        503: "A store cannot be reached; retry after `Retry-After` seconds.",
    }
    texts.update({int(k[1:]): v for k, v in described.items()})
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        out[status] = error_entry(texts.get(status, ""), retry_after=status in (409, 429, 503))
    return out


def replayable(description: str) -> dict[str, Any]:
    """An OpenAPI response entry that may carry `Idempotent-Replayed: true`."""
    return {"description": description, "headers": {"Idempotent-Replayed": _REPLAYED}}


# How one answer leads to the next request (OpenAPI links), by FastAPI's operation ids.
_GET_SETTLEMENT = "get_settlement_v1_settlements__settlement_id__get"
_LIST_SETTLEMENTS = "list_settlements_v1_settlements_get"
_GET_BALANCE = "get_balance_v1_accounts__account__balance_get"
_LIST_ENTRIES = "list_entries_v1_accounts__account__entries_get"


def _link(operation_id: str, **parameters: str) -> dict[str, Any]:
    return {"operationId": operation_id, "parameters": parameters}


def _next_page(operation_id: str, *kept: str) -> dict[str, Any]:
    # The same list from where the page ended, under the same filters.
    same = {name: f"$request.{name}" for name in kept}
    return _link(operation_id, **same, **{"query.cursor": "$response.body#/next_cursor"})


def _accounts_of(pointer: str) -> dict[str, dict[str, Any]]:
    return {
        "AccountBalance": _link(_GET_BALANCE, **{"path.account": pointer}),
        "AccountEntries": _link(_LIST_ENTRIES, **{"path.account": pointer}),
    }


LINKS: dict[str, dict[str, dict[str, dict[str, Any]]]] = {
    "create_settlement_v1_settlements_post": {
        "201": {
            "GetSettlement": _link(_GET_SETTLEMENT, **{"path.settlement_id": "$response.body#/id"})
        }
    },
    _LIST_SETTLEMENTS: {
        "200": {
            "NextPage": _next_page(
                _LIST_SETTLEMENTS, "query.reference", "query.status", "query.limit"
            ),
            "FirstSettlement": _link(
                _GET_SETTLEMENT, **{"path.settlement_id": "$response.body#/data/0/id"}
            ),
        }
    },
    _GET_SETTLEMENT: {"200": _accounts_of("$response.body#/postings/0/account_id")},
    _LIST_ENTRIES: {
        "200": {
            "NextPage": _next_page(_LIST_ENTRIES, "path.account", "query.limit"),
            "EntrySettlement": _link(
                _GET_SETTLEMENT, **{"path.settlement_id": "$response.body#/data/0/settlement_id"}
            ),
        }
    },
}
