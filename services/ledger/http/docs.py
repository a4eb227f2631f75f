"""What /openapi.json says beyond the routes themselves: the request body and error shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.domain.money import MAX_SETTLEMENT_AMOUNT


class SettlementBody(BaseModel):
    """The body of POST /v1/settlements (validated by the ledger's intake, not by FastAPI).

    Unknown fields are refused; the tenant comes from the bearer token, never the body.
    """

    model_config = ConfigDict(extra="forbid", title="SettlementBody")

    reference: str = Field(min_length=1, max_length=255, description="Your unique payout id.")
    payee: str = Field(min_length=1, max_length=255, description="Who is paid.")
    destination: str = Field(min_length=1, max_length=255, description="The rail account.")
    amount: int = Field(
        gt=0,
        le=MAX_SETTLEMENT_AMOUNT,
        description="Minor units; 100 and 100.0 are equal, 100.5 invalid.",
    )
    currency: str = Field(pattern="^[A-Z]{3}$", description="ISO 4217 code.")
    rail: Literal["sim", "stripe", "sepa"] | None = Field(
        None,
        description=(
            "Omitted: the tenant's default rail for the currency, else the first rail here "
            "that pays it."
        ),
    )
    metadata: dict[str, str] = Field(
        default_factory=dict,
        max_length=50,
        description="Up to 50 pairs; keys 1..40 characters without [ ], values up to 500.",
    )


class ErrorDetail(BaseModel):
    """What went wrong, machine-readably."""

    code: str = Field(description="Stable machine-readable code, e.g. `invalid_amount`.")
    message: str = Field(description="For people; may change.")
    field: str | None = Field(None, description="The offending field, header or parameter.")


class ErrorResponse(BaseModel):
    """The one shape every error response has."""

    error: ErrorDetail


REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SettlementBody.model_json_schema()}},
    }
}

IDEMPOTENCY_KEY = (
    "1..255 printable characters. A retry with the same key and body replays the first "
    "response byte for byte; with another body it is refused with 422."
)

_RETRY_AFTER = {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}
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
        entry: dict[str, Any] = {"model": ErrorResponse, "description": texts.get(status, "")}
        if status in (409, 429, 503):
            entry["headers"] = {"Retry-After": _RETRY_AFTER}
        out[status] = entry
    return out


def replayable(description: str) -> dict[str, Any]:
    """An OpenAPI response entry that may carry `Idempotent-Replayed: true`."""
    return {"description": description, "headers": {"Idempotent-Replayed": _REPLAYED}}
