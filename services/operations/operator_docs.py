"""What the operator API's document says beyond its routes' signatures: the query parameters
and request bodies the routes read themselves (services/operations/query.py, each action's
`check`), so the document says exactly what they take, and the answers' shapes.

A blank filter of a break listing is not asked for, so its enums hold "" too; whole numbers
in a query are ASCII digits, at most 18 of them (`keyset.parse_id`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field

from services.domain.money import CURRENCIES
from services.domain.proposal import ProposalStatus
from services.operations.query import MAX_BODY
from services.platform.api_docs import error_entry

WHOLE = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
BLANK_OR_WHOLE = {"anyOf": [WHOLE, {"type": "string", "enum": [""]}]}
# What `action_base.required` takes (text that says something) and PostgreSQL keeps (no NUL).
NON_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"
NO_NUL = r"^[^\x00]*$"
REASON = {"type": "string", "pattern": NON_BLANK, "description": "Why: kept in the audit row."}
ANY_REASON = {
    "type": "string",
    "pattern": NO_NUL,
    "description": "Kept in the audit row when not blank.",
}
CURRENCY = {"type": "string", "enum": sorted(CURRENCIES)}


_FAILURES = {
    400: "A parameter or the body cannot be read; `error.field` names it.",
    401: "Missing or unknown operator token (`unauthorized`).",
    403: (
        "`operator_mismatch`: `Settle-Operator` names another operator than the token's; "
        "`forbidden`: a tenant's token where the service knows them."
    ),
    404: "No such item (an id of the wrong shape names none either).",
    409: "Refused as things stand; `error.code` says why (e.g. `not_in_review`).",
    413: f"The body is over {MAX_BODY} bytes (`body_too_large`).",
    503: (
        "The database (`store_unavailable`) or the rail (`rail_unreadable`) could not be "
        "asked; retry after `Retry-After` seconds."
    ),
}


def failures(*statuses: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """Response entries in the error shape for `statuses` (and `s<N>=` texts of their own)."""
    texts = {**_FAILURES, **{int(k[1:]): v for k, v in described.items()}}
    return {status: error_entry(texts[status], retry_after=status == 503) for status in statuses}


def settlement_id() -> Any:
    """A path's settlement id, as documented (read by `review.parse_id`, not FastAPI)."""
    return Path(
        description="A settlement's UUID; any other names none (404).",
        json_schema_extra={"format": "uuid"},
    )


def whole_id(what: str) -> Any:
    """A path's id of `what` (a break, a proposal), as documented (read by
    `keyset.parse_id`, not FastAPI)."""
    return Path(
        description=f"{what}'s id: digits; any other names none (404).",
        json_schema_extra={"pattern": "^[0-9]{1,18}$"},
    )


def query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """An optional query parameter as the document gives it."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def choices(*values: str, blank: bool = False) -> dict[str, Any]:
    """A string of `values` (and "", not asked for, when `blank`)."""
    return {"type": "string", "enum": [*values, ""] if blank else list(values)}


def body(properties: dict[str, Any], *required: str, closed: bool = False) -> dict[str, Any]:
    """`openapi_extra` of a route reading a JSON object of `properties` itself (at most
    query.MAX_BODY bytes; none sent is `{}`); `closed`: no other property is taken."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if closed:
        schema["additionalProperties"] = False
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": bool(required), "content": content}}


def with_parameters(*parameters: dict[str, Any]) -> dict[str, Any]:
    """`openapi_extra` documenting query `parameters` the route reads itself."""
    return {"parameters": list(parameters)}


def link(operation_id: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to `operation_id` with `parameters` (`path.id`: a runtime expression)."""
    return {"operationId": operation_id, "parameters": parameters}


def answer(description: str, **links: dict[str, Any]) -> dict[str, Any]:
    """A response entry with its `links`."""
    return {"description": description, "links": links} if links else {"description": description}


class ReviewItem(BaseModel):
    """A settlement under review with its rail instruction."""

    model_config = ConfigDict(title="ReviewItem")

    id: str = Field(description="The settlement's UUID.")
    tenant: str
    reference: str
    amount: int
    currency: str
    status: str
    reason: str | None
    version: int
    rail_reference: str | None
    updated_at: str
    instruction_status: str
    method: str
    destination: str
    idempotency_key: str
    attempts: int
    error_class: str | None
    instruction_reference: str | None
    instruction_created_at: str


class ReviewPage(BaseModel):
    """A page of settlements under review; `next_after` is the last one's id."""

    data: list[ReviewItem]
    next_after: str | None


class Resolved(BaseModel):
    """A resolution done."""

    settlement_id: str
    resolution: str
    settlement: str = Field(description="The settlement's status after it.")
    instruction: str = Field(description="The rail instruction's status after it.")
    rail_reference: str | None
    action_id: int = Field(description="Its audit row.")


class Proposal(BaseModel):
    """An action proposed for a second operator's approval, and where it stands."""

    id: int
    action: str
    target: str
    payload: dict[str, Any] | None
    reason: str | None
    proposed_by: str
    proposed_at: str
    status: ProposalStatus
    decided_by: str | None
    decided_at: str | None
    outcome: Any = Field(description="The action's result or refusal, once decided.")


class ProposalPage(BaseModel):
    """A page of proposals; `next_after` is the last one's id."""

    data: list[Proposal]
    next_after: int | None


class Break(BaseModel):
    """A reconciliation break as operators see it."""

    model_config = ConfigDict(title="Break")

    id: int
    type: str
    status: str
    settlement_id: str | None
    rail_object_id: str | None
    field: str
    currency: str | None
    expected: Any
    actual: Any
    reason: str | None
    first_seen: str
    last_seen: str
    resolved_at: str | None
    resolved_by: str | None
    resolution_reason: str | None
    previous_id: int | None
    assignee: str | None
    resolution_kind: str | None
    difference: int | None = Field(description="actual - expected, for a break about money.")
    age_bucket: str


class Comment(BaseModel):
    """A note on a break."""

    id: int
    author: str
    text: str
    written_at: str


class BreakShown(Break):
    """One break with its comments."""

    model_config = ConfigDict(title="BreakShown")

    comments: list[Comment]


class BreakPage(BaseModel):
    """A page of breaks; `next_after` is the last one's id."""

    data: list[Break]
    next_after: int | None


class PolicyShown(BaseModel):
    """Two-person mode in force: the server's setting or the database's."""

    two_person: bool
    database_two_person: bool
    server_two_person: bool
    proposal_max_age_seconds: int
    changed_at: str
    changed_by_action: int | None


class PolicyChanged(BaseModel):
    """Two-person mode as the database holds it now."""

    two_person: bool
    changed_by_action: int
    operator: str
    approved_by: str | None


class InboxEvent(BaseModel):
    """A rail event as the inbox stored it."""

    id: int
    rail: str
    rail_event_id: str
    event_type: str | None
    object_id: str | None
    settlement_id: str | None
    status: str
    attempts: int
    next_attempt_at: str | None
    reason: str | None
    received_at: str
    applied_at: str | None
    mismatch: list[dict[str, Any]] | None = Field(description="What disagreed, for a mismatch.")


class InboxPage(BaseModel):
    """A page of inbox events; `next_cursor` is null on the last page."""

    data: list[InboxEvent]
    next_cursor: str | None


class Replayed(BaseModel):
    """An inbox event back with the apply worker."""

    id: int
    status: str


def proposed(done: type[BaseModel] | None, description: str) -> dict[int | str, Any]:
    """The 200 (done: `done`'s shape, or an object) and 202 (proposed) of an action."""
    ok: dict[str, Any] = {"description": description}
    if done is None:
        ok["content"] = {"application/json": {"schema": {"type": "object"}}}
    else:
        ok["model"] = done
    waiting = "Proposed, in two-person mode: a different operator approves or rejects it."
    return {200: ok, 202: {"model": Proposal, "description": waiting}}
