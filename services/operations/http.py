"""Operator actions over HTTP, for a service to mount: `routes(...)` gives FastAPI routes.

    GET  /v1/review                      settlements under review (?after=<id>&limit=)
    GET  /v1/review/{id}                 one settlement with its rail instruction
    POST /v1/review/{id}/resolve         {"as": "paid|failed|retry", "reason": "..."}
    GET  /v1/breaks                      breaks (?status=&type=&bucket=&currency=&min_amount=
                                         &max_amount=&after=&limit=)
    GET  /v1/breaks/export               open breaks streamed (?format=csv|jsonl&type=)
    GET  /v1/breaks/{id}                 one break, with its comments
    POST /v1/breaks/{id}/{action}        resolve, write_off, adjust, correct, match, assign,
                                         comment, reopen (services/operations/break_http.py)
    GET  /v1/approvals                   proposals (?status=pending|...|any&after=&limit=)
    POST /v1/approvals/{id}/approve      a different operator approves: the action is done
    POST /v1/approvals/{id}/reject       a different operator refuses it {"reason": optional}
    POST /v1/approvals/{id}/withdraw     its proposer takes it back
    GET  /v1/policy                      two-person mode (the server's, the database's) and
                                         the proposals' age
    POST /v1/policy/two-person           {"on": true|false, "reason": "..."}: turning it off
                                         while on is proposed for a second operator

In two-person mode (`Policy.two_person`, services/operations/approvals.py) an action that moves
money or closes a break is not done but proposed: 202 with the proposal, for a different
operator to approve; assigning, commenting and reopening a break are done at once.

Every route takes `Authorization: Bearer <operator token>` (SETTLE_OPERATOR_TOKENS): who the
request acts for, operator_auth.py. The routes read their query and body themselves
(query.py), as operator_docs.py documents them; errors leave in the shared edge's shape with
a status and a code, once the app answers them (`edge.install_error_handlers`).
"""

from __future__ import annotations

from typing import Any

import asyncpg
from fastapi import APIRouter, Request, Response
from starlette.routing import BaseRoute

from services.domain.instruction import Resolution
from services.domain.proposal import Move, ProposalStatus, ProposedAction
from services.operations import operator_docs as doc
from services.operations import review
from services.operations.approval_policy import ONE_PERSON, Policy
from services.operations.approvals import Submitted
from services.operations.break_http import break_routes
from services.operations.desk import OperationsDesk
from services.operations.errors import BadRequest
from services.operations.operator_auth import operator_of
from services.operations.policy import policy_document
from services.operations.query import (
    choice,
    json_body,
    json_response,
    optional_text,
    reason,
    whole_number,
)
from services.operations.rail_lookup import RailLookup
from services.platform.bearer import BearerAuth
from services.platform.clock import Clock, utc_now

LIST_ERRORS = doc.failures(400, 401, 403, 503)
ACTION_ERRORS = doc.failures(400, 401, 403, 404, 409, 413, 503)


def routes(
    pool: asyncpg.Pool,
    rail: RailLookup,
    operators: BearerAuth,
    tenants: BearerAuth | None = None,
    clock: Clock = utc_now,
    policy: Policy = ONE_PERSON,
) -> list[BaseRoute]:
    """The operator routes (see the module docstring), for a FastAPI app that answers errors
    in the edge's shape; `tenants`: a tenant's token is then 403 rather than 401."""
    desk = OperationsDesk(pool, rail, policy, clock)
    operator = operator_of(operators, tenants)
    router = APIRouter(tags=["operators"])
    for part in (
        _review_routes(desk, operator),
        break_routes(desk, operator),
        _approval_routes(desk, operator),
        _policy_routes(desk, operator),
    ):
        router.include_router(part)
    return list(router.routes)


def _answer(done: Submitted) -> Response:
    """An action done (200 with its result) or, in two-person mode, proposed (202)."""
    return json_response(done.document, 202 if done.proposed else 200)


_REVIEW_PAGE = doc.with_parameters(
    doc.query("after", {"type": "string", "format": "uuid"}, "`next_after` of the last page."),
    doc.query("limit", doc.WHOLE, "How many, at most (default 50, capped at 200)."),
)
_REVIEW_LINKS = {
    "NextPage": doc.link(
        "review_list",
        **{"query.after": "$response.body#/next_after", "query.limit": "$request.query.limit"},
    ),
    "ShowFirst": doc.link("review_show", **{"path.id": "$response.body#/data/0/id"}),
    "ResolveFirst": doc.link("review_resolve", **{"path.id": "$response.body#/data/0/id"}),
}
_RESOLVE_BODY = doc.body({"as": doc.choices(*Resolution), "reason": doc.REASON}, "as", "reason")


def _review_routes(desk: OperationsDesk, operator: Any) -> APIRouter:
    pool, router, settlement = desk.pool, APIRouter(), doc.settlement_id()

    @router.get(
        "/v1/review",
        operation_id="review_list",
        summary="Settlements under review, by id",
        openapi_extra=_REVIEW_PAGE,
        responses={
            200: {"model": doc.ReviewPage, **doc.answer("A page.", **_REVIEW_LINKS)},
            **doc.failures(400, 401, 403, 404, 503, s404="`after` is not a settlement id."),
        },
    )
    async def review_list(request: Request, _: str = operator) -> Response:
        q = request.query_params
        after = review.parse_id(q["after"]) if "after" in q else None
        items = await review.list_review(pool, after, whole_number(q.get("limit"), "limit", 50))
        return json_response({"data": items, "next_after": items[-1]["id"] if items else None})

    @router.get(
        "/v1/review/{id}",
        operation_id="review_show",
        summary="One settlement with its rail instruction, whatever its status",
        responses={
            200: {
                "model": doc.ReviewItem,
                **doc.answer(
                    "The settlement.",
                    Resolve=doc.link("review_resolve", **{"path.id": "$request.path.id"}),
                ),
            },
            **doc.failures(401, 403, 404, 503),
        },
    )
    async def review_show(id: str = settlement, _: str = operator) -> Response:
        return json_response(await review.show(pool, id))

    @router.post(
        "/v1/review/{id}/resolve",
        operation_id="review_resolve",
        summary="Resolve a settlement under review as paid, failed or retry, if the rail agrees",
        openapi_extra=_RESOLVE_BODY,
        responses={**doc.proposed(doc.Resolved, "Resolved."), **ACTION_ERRORS},
    )
    async def review_resolve(
        request: Request, id: str = settlement, acting: str = operator
    ) -> Response:
        body = await json_body(request)
        resolution = choice(Resolution, body.get("as"), "as")
        if resolution is None:
            raise BadRequest('say how: "as": paid, failed or retry', code="invalid_as", field="as")
        payload = {"as": str(resolution)}
        why = reason(body)
        done = await desk.act(
            ProposedAction.REVIEW_RESOLVE, id, payload, reason=why, operator=acting
        )
        return _answer(done)

    return router


_APPROVALS_PAGE = doc.with_parameters(
    doc.query("status", doc.choices(*ProposalStatus, "any"), "Which (default pending)."),
    doc.query("after", doc.WHOLE, "`next_after` of the last page."),
    doc.query("limit", doc.WHOLE, "How many, at most (default 50, capped at 200)."),
)
_FIRST = {"path.id": "$response.body#/data/0/id"}
_APPROVALS_LINKS = {
    "NextPage": doc.link(
        "approvals_list",
        **{
            "query.status": "$request.query.status",
            "query.after": "$response.body#/next_after",
            "query.limit": "$request.query.limit",
        },
    ),
    "ApproveFirst": doc.link("approvals_approve", **_FIRST),
    "RejectFirst": doc.link("approvals_reject", **_FIRST),
    "WithdrawFirst": doc.link("approvals_withdraw", **_FIRST),
}
_DECIDED = {
    Move.APPROVE: ("A different operator approves it: its action is done.", None),
    Move.REJECT: (
        "A different operator refuses it.",
        doc.body({"reason": doc.ANY_REASON}),
    ),
    Move.WITHDRAW: ("Its proposer takes it back.", None),
}


def _approval_routes(desk: OperationsDesk, operator: Any) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/v1/approvals",
        operation_id="approvals_list",
        summary="Proposals, by id",
        openapi_extra=_APPROVALS_PAGE,
        responses={
            200: {"model": doc.ProposalPage, **doc.answer("A page.", **_APPROVALS_LINKS)},
            **LIST_ERRORS,
        },
    )
    async def approvals_list(request: Request, _: str = operator) -> Response:
        q = request.query_params
        wanted = q.get("status", ProposalStatus.PENDING.value)
        status = None if wanted == "any" else choice(ProposalStatus, wanted, "status")
        found = await desk.proposals(
            status=status,
            after=whole_number(q.get("after"), "after", 0),
            limit=whole_number(q.get("limit"), "limit", 50),
        )
        return json_response({"data": found, "next_after": found[-1]["id"] if found else None})

    for move, (summary, extra) in _DECIDED.items():
        router.add_api_route(
            f"/v1/approvals/{{id}}/{move.value}",
            _deciding(desk, move, operator),
            methods=["POST"],
            operation_id=f"approvals_{move.value}",
            summary=summary,
            openapi_extra=extra,
            responses={
                200: {"model": doc.Proposal, "description": "The proposal, decided."},
                **ACTION_ERRORS,
            },
        )
    return router


def _deciding(desk: OperationsDesk, move: Move, operator: Any) -> Any:
    proposal = doc.whole_id("A proposal")

    async def decide(request: Request, id: str = proposal, acting: str = operator) -> Response:
        why = optional_text(await json_body(request), "reason") if move is Move.REJECT else None
        return json_response(await desk.decide(move, id, operator=acting, reason=why))

    return decide


_TWO_PERSON_BODY = doc.body({"on": {"type": "boolean"}, "reason": doc.REASON}, "on", "reason")


def _policy_routes(desk: OperationsDesk, operator: Any) -> APIRouter:
    router = APIRouter()

    @router.get(
        "/v1/policy",
        operation_id="policy_show",
        summary="Two-person mode in force, and how long a proposal waits",
        responses={
            200: {"model": doc.PolicyShown, "description": "The policy."},
            **doc.failures(401, 403, 503),
        },
    )
    async def show(_: str = operator) -> Response:
        max_age = int(desk.policy.max_age.total_seconds())
        return json_response(
            await policy_document(
                desk.pool, server_two_person=desk.policy.two_person, max_age_seconds=max_age
            )
        )

    @router.post(
        "/v1/policy/two-person",
        operation_id="policy_two_person",
        summary="Turn two-person mode on or off (off, while on, is proposed)",
        openapi_extra=_TWO_PERSON_BODY,
        responses={**doc.proposed(doc.PolicyChanged, "Changed."), **ACTION_ERRORS},
    )
    async def two_person(request: Request, acting: str = operator) -> Response:
        body = await json_body(request)
        done = await desk.act(
            ProposedAction.POLICY_TWO_PERSON,
            "two_person",
            {"on": body.get("on")},
            reason=reason(body),
            operator=acting,
        )
        return _answer(done)

    return router
