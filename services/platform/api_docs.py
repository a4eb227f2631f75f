"""What every service's /openapi.json is corrected or extended with beyond FastAPI's own output,
and the error shape (`ErrorResponse`, `error_entry`) its routes document.

FastAPI documents a 422 `HTTPValidationError` on every route that has parameters, but
`edge.install_error_handlers` answers a bad parameter 400 in the one error shape, so that
422 is never sent: `document_error_shape` takes it out. A 422 a route documents itself (in
the error shape, e.g. the ledger's refused settlement) stays.

`add_links` puts OpenAPI links (how one operation's answer feeds the next) into responses
FastAPI generates, keyed by operation id, so clients and the fuzzer's stateful phase can
follow them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

_FASTAPI_422 = "#/components/schemas/HTTPValidationError"
_FASTAPI_SCHEMAS = ("HTTPValidationError", "ValidationError")

RETRY_AFTER = {"description": "Seconds to wait before retrying.", "schema": {"type": "integer"}}


class ErrorDetail(BaseModel):
    """What went wrong, machine-readably."""

    code: str = Field(description="Stable machine-readable code, e.g. `invalid_amount`.")
    message: str = Field(description="For people; may change.")
    field: str | None = Field(None, description="The offending field, header or parameter.")


class ErrorResponse(BaseModel):
    """The one shape every error response has."""

    error: ErrorDetail


def error_entry(description: str, *, retry_after: bool = False) -> dict[str, Any]:
    """A FastAPI `responses` entry for an answer in the error shape."""
    entry: dict[str, Any] = {"model": ErrorResponse, "description": description}
    if retry_after:
        entry["headers"] = {"Retry-After": RETRY_AFTER}
    return entry


# operation id -> status -> link name -> OpenAPI Link object
Links = Mapping[str, Mapping[str, Mapping[str, Mapping[str, Any]]]]


def _extend(app: FastAPI, change: Any) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()  # cached by FastAPI after the first call; `change` is idempotent
        change(schema)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for path in schema.get("paths", {}).values() for op in path.values()]


def _drop_fastapi_422(schema: dict[str, Any]) -> None:
    for operation in _operations(schema):
        responses = operation.get("responses", {})
        content = responses.get("422", {}).get("content", {}).get("application/json", {})
        if content.get("schema", {}).get("$ref") == _FASTAPI_422:
            del responses["422"]
    components = schema.get("components", {}).get("schemas", {})
    for name in _FASTAPI_SCHEMAS:
        components.pop(name, None)


def document_error_shape(app: FastAPI) -> None:
    """Make `app`'s document say what `install_error_handlers` answers: no FastAPI 422."""
    _extend(app, _drop_fastapi_422)


def add_schemas(app: FastAPI, schemas: Mapping[str, Any]) -> None:
    """Add named `schemas` to `app`'s document, for the `$ref`s a route's extra docs make."""

    def change(schema: dict[str, Any]) -> None:
        schema.setdefault("components", {}).setdefault("schemas", {}).update(schemas)

    _extend(app, change)


def add_links(app: FastAPI, links: Links) -> None:
    """Add `links` to the responses of `app`'s document; an unknown operation id or an
    undocumented status is a mistake in `links`, raised when the document is built."""

    def change(schema: dict[str, Any]) -> None:
        by_id = {op.get("operationId"): op for op in _operations(schema)}
        for operation_id, statuses in links.items():
            responses = by_id[operation_id]["responses"]
            for status, named in statuses.items():
                responses[status].setdefault("links", {}).update(named)

    _extend(app, change)
