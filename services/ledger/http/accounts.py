"""Account reads: balance (the sum of its shards) and postings, for the caller's own accounts."""

# No `from __future__ import annotations`: FastAPI must see the route-local `Tenant` alias
# as an object, not as a string it would try to resolve in module globals.

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import TypeAdapter

from services.ledger.http import docs
from services.ledger.http.readers import READ_LIMITED, Reader
from services.ledger.views import MAX_PAGE, AccountBalance, EntryPage, SettlementReader
from services.platform.edge import JSON, error_response

_BALANCE = TypeAdapter(AccountBalance)
_ENTRIES = TypeAdapter(EntryPage)
_ACCOUNT = "`<tenant>:<kind>:<currency>`, e.g. `acme:funding:USD`; only the caller's own."


def account_routes(reads: SettlementReader, reader: Reader) -> APIRouter:
    """The /v1/accounts routes over `reads`, for the tenant `reader` (a dependency) gives."""
    router = APIRouter(prefix="/v1/accounts", tags=["accounts"])
    Tenant = Annotated[str, Depends(reader)]

    @router.get(
        "/{account}/balance",
        summary="An account's balance",
        response_model=AccountBalance,
        responses=docs.errors(401, 404, 429, 503, s429=READ_LIMITED),
        description=_ACCOUNT,
    )
    async def get_balance(tenant: Tenant, account: str) -> Response:
        balance = await reads.balance(tenant, account)
        if balance is None:
            return error_response(404, "not_found", "no such account")
        return Response(_BALANCE.dump_json(balance), media_type=JSON)

    @router.get(
        "/{account}/entries",
        summary="An account's postings, newest first",
        response_model=EntryPage,
        responses=docs.errors(400, 401, 404, 429, 503, s429=READ_LIMITED),
        description=_ACCOUNT,
    )
    async def list_entries(
        tenant: Tenant,
        account: str,
        cursor: Annotated[docs.EntriesCursor | None, Query(description=docs.CURSOR)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 20,
    ) -> Response:
        page = await reads.entries(tenant, account, cursor=cursor, limit=limit)
        if page is None:
            return error_response(404, "not_found", "no such account")
        return Response(_ENTRIES.dump_json(page), media_type=JSON)

    return router
