"""Operator actions on the inbox over HTTP, for the operator API (the reconciler's) to mount:
the events in one status, and a dead or parked event replayed (proposed, in two-person mode).
Every route takes `Authorization: Bearer <operator token>` (operator_auth.py)."""

from __future__ import annotations

from typing import Annotated, Any

import asyncpg
import orjson
from fastapi import APIRouter, Query, Response

from services.adapters.postgres.store_errors import UNREACHABLE
from services.domain.errors import StoreUnavailable
from services.domain.proposal import ProposedAction
from services.domain.rail_event import InboxStatus
from services.inbox.operator import list_events
from services.operations.approval_policy import Policy
from services.operations.desk import OperationsDesk
from services.operations.operator_auth import operator_of as operator_dependency
from services.operations.operator_docs import InboxPage, Proposal, Replayed, failures
from services.operations.rail_lookup import NoRail
from services.platform.bearer import BearerAuth
from services.platform.clock import Clock
from services.platform.edge import JSON

STORE_FAILURES = (*UNREACHABLE, asyncpg.PostgresError)


def _json(value: object, status: int = 200) -> Response:
    return Response(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), status, media_type=JSON)


# The next page of the same list; the first event of a page, sent back to apply.
_LIST_LINKS: dict[str, Any] = {
    "NextPage": {
        "operationId": "inbox_v1_inbox_get",
        "parameters": {
            "query.status": "$request.query.status",
            "query.limit": "$request.query.limit",
            "query.cursor": "$response.body#/next_cursor",
        },
    },
    "ReplayFirst": {
        "operationId": "replay_event_v1_inbox__event__replay_post",
        "parameters": {"path.event": "$response.body#/data/0/id"},
    },
}


_REPLAY_ANSWERS: dict[int | str, dict[str, Any]] = {
    202: {
        "model": Replayed | Proposal,
        "description": "Back with the worker, or proposed in two-person mode.",
    },
    **failures(
        401,
        403,
        404,
        409,
        503,
        s409="Not replayable as things stand: `not_replayable`, `mismatch_not_replayable`, "
        "`proposal_pending`.",
    ),
}


def inbox_routes(
    pool: asyncpg.Pool, operators: BearerAuth, clock: Clock, policy: Policy
) -> APIRouter:
    """The operator routes over inbox events: `GET /v1/inbox` lists one status, oldest first;
    `POST /v1/inbox/{event}/replay` sends a dead or parked event back to apply (proposed for a
    second operator in two-person mode)."""
    desk = OperationsDesk(pool, NoRail(), policy, clock)  # a replay asks nothing of the rail
    router = APIRouter(tags=["operators"])
    # A default, not an Annotated alias: a local alias is not resolvable from string annotations.
    operator_of = operator_dependency(operators)

    @router.get(
        "/v1/inbox",
        summary="Inbox events in one status, oldest first",
        responses={
            200: {"model": InboxPage, "description": "A page of events.", "links": _LIST_LINKS},
            **failures(400, 401, 403, 503),
        },
    )
    async def inbox(
        status: Annotated[InboxStatus, Query()],
        cursor: Annotated[str, Query(pattern=r"^[0-9]{1,18}$")] = "0",
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        _: str = operator_of,
    ) -> Response:
        try:
            return _json(await list_events(pool, status, int(cursor), limit))
        except STORE_FAILURES as e:
            raise StoreUnavailable("the inbox store does not answer") from e

    @router.post(
        "/v1/inbox/{event}/replay",
        summary="Send a dead or parked event back to apply",
        status_code=202,
        responses=_REPLAY_ANSWERS,
    )
    async def replay_event(event: str, operator: str = operator_of) -> Response:
        # 202 either way: the event is back in the worker's hands, or, in two-person mode,
        # the proposal awaits a second operator.
        try:
            done = await desk.act(
                ProposedAction.INBOX_REPLAY, event, {}, reason=None, operator=operator
            )
        except STORE_FAILURES as e:
            raise StoreUnavailable("the inbox store does not answer") from e
        return _json(done.document, 202)

    return router
