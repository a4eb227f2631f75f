"""Operator actions over HTTP, for a service to mount: `routes(...)` gives Starlette routes.

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

Every route takes `Authorization: Bearer <operator token>` (SETTLE_OPERATOR_TOKENS); the
token's name is the operator the audit row names. No token or an unknown one is 401, a
tenant's API token 403; a request naming its operator (`Settle-Operator: <name>`, as the
`settle` operator commands send `--operator`) with another operator's token is 403
`operator_mismatch`. Errors leave in the shared edge's shape with a status and a code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import asyncpg
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.domain.errors import ApiError
from services.domain.instruction import Resolution
from services.domain.proposal import Move, ProposalStatus, ProposedAction
from services.operations import review
from services.operations.approval_policy import ONE_PERSON, Policy
from services.operations.approvals import Submitted
from services.operations.break_http import break_routes
from services.operations.desk import OperationsDesk
from services.operations.errors import BadRequest, Forbidden
from services.operations.operator_proof import CLAIMED, acting_operator
from services.operations.policy import policy_document
from services.operations.query import choice, json_body, json_response, reason, whole_number
from services.operations.rail_lookup import RailLookup
from services.platform.bearer import BearerAuth, Unauthorized, bearer_token
from services.platform.clock import Clock, utc_now
from services.platform.edge import api_error_response

FORBIDDEN = "a tenant's token; operator actions need an operator token (SETTLE_OPERATOR_TOKENS)"
Handler = Callable[[Request, str], Awaitable[Response]]  # request, operator -> response
Endpoint = Callable[[Request], Awaitable[Response]]
_E = TypeVar("_E", bound=StrEnum)


def _guarded(operators: BearerAuth, tenants: BearerAuth | None, handler: Handler) -> Endpoint:
    """`handler` behind the operator token, every ApiError answered in the edge's shape."""

    async def endpoint(request: Request) -> Response:
        token = bearer_token(request.headers.get("authorization"))
        try:
            try:
                operator = operators.tenant_for(token)
            except Unauthorized:
                if tenants is not None and token:
                    tenants.tenant_for(token)  # a tenant's token: known, but not an operator's
                    raise Forbidden(FORBIDDEN) from None
                raise
            return await handler(request, acting_operator(operator, request.headers.get(CLAIMED)))
        except ApiError as e:
            return api_error_response(e)

    return endpoint


def routes(
    pool: asyncpg.Pool,
    rail: RailLookup,
    operators: BearerAuth,
    tenants: BearerAuth | None = None,
    clock: Clock = utc_now,
    policy: Policy = ONE_PERSON,
) -> list[Route]:
    """The operator routes (see the module docstring), for a Starlette or FastAPI app."""
    desk = OperationsDesk(pool, rail, policy, clock)
    handlers = [
        *_review_routes(desk),
        *break_routes(desk),
        *_approval_routes(desk),
        *_policy_routes(desk),
    ]
    return [
        Route(path, _guarded(operators, tenants, handler), methods=[method])
        for path, method, handler in handlers
    ]


def _answer(done: Submitted) -> Response:
    """An action done (200 with its result) or, in two-person mode, proposed (202)."""
    return json_response(done.document, 202 if done.proposed else 200)


def _review_routes(desk: OperationsDesk) -> list[tuple[str, str, Handler]]:
    pool = desk.pool

    async def review_list(request: Request, _: str) -> Response:
        q = request.query_params
        after = review.parse_id(q["after"]) if "after" in q else None
        items = await review.list_review(pool, after, whole_number(q.get("limit"), "limit", 50))
        return json_response({"data": items, "next_after": items[-1]["id"] if items else None})

    async def review_show(request: Request, _: str) -> Response:
        return json_response(await review.show(pool, request.path_params["id"]))

    async def review_resolve(request: Request, operator: str) -> Response:
        body = await json_body(request)
        resolution = choice(Resolution, body.get("as"), "as")
        if resolution is None:
            raise BadRequest('say how: "as": paid, failed or retry', code="invalid_as", field="as")
        payload = {"as": str(resolution)}
        done = await desk.act(
            ProposedAction.REVIEW_RESOLVE,
            request.path_params["id"],
            payload,
            reason=reason(body),
            operator=operator,
        )
        return _answer(done)

    return [
        ("/v1/review", "GET", review_list),
        ("/v1/review/{id}", "GET", review_show),
        ("/v1/review/{id}/resolve", "POST", review_resolve),
    ]


def _approval_routes(desk: OperationsDesk) -> list[tuple[str, str, Handler]]:
    async def approvals_list(request: Request, _: str) -> Response:
        q = request.query_params
        wanted = q.get("status", ProposalStatus.PENDING.value)
        status = None if wanted == "any" else choice(ProposalStatus, wanted, "status")
        found = await desk.proposals(
            status=status,
            after=whole_number(q.get("after"), "after", 0),
            limit=whole_number(q.get("limit"), "limit", 50),
        )
        return json_response({"data": found, "next_after": found[-1]["id"] if found else None})

    def deciding(move: Move) -> Handler:
        async def decide(request: Request, operator: str) -> Response:
            why = (await json_body(request)).get("reason") if move is Move.REJECT else None
            proposal = request.path_params["id"]
            reason = why if isinstance(why, str) else None
            return json_response(
                await desk.decide(move, proposal, operator=operator, reason=reason)
            )

        return decide

    return [
        ("/v1/approvals", "GET", approvals_list),
        ("/v1/approvals/{id}/approve", "POST", deciding(Move.APPROVE)),
        ("/v1/approvals/{id}/reject", "POST", deciding(Move.REJECT)),
        ("/v1/approvals/{id}/withdraw", "POST", deciding(Move.WITHDRAW)),
    ]


def _policy_routes(desk: OperationsDesk) -> list[tuple[str, str, Handler]]:
    async def show(request: Request, _: str) -> Response:
        max_age = int(desk.policy.max_age.total_seconds())
        return json_response(
            await policy_document(
                desk.pool, server_two_person=desk.policy.two_person, max_age_seconds=max_age
            )
        )

    async def two_person(request: Request, operator: str) -> Response:
        body = await json_body(request)
        done = await desk.act(
            ProposedAction.POLICY_TWO_PERSON,
            "two_person",
            {"on": body.get("on")},
            reason=reason(body),
            operator=operator,
        )
        return _answer(done)

    return [("/v1/policy", "GET", show), ("/v1/policy/two-person", "POST", two_person)]
