"""Who an operator route acts for, as a FastAPI dependency every route of the operator API
takes (review, breaks, approvals, policy: http.py, break_http.py; inbox events:
inbox_http.py): the operator of `Authorization: Bearer <operator token>`
(SETTLE_OPERATOR_TOKENS), documented as the `operatorToken` security scheme, and the
`Settle-Operator` header a request may name its operator in.

No token or an unknown one is 401 `unauthorized`; where the service also knows the tenants'
tokens (`tenants`), a tenant's token is 403 `forbidden`; a request naming another operator
than its token's is 403 `operator_mismatch` (operator_proof.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, Header, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.operations.errors import Forbidden
from services.operations.operator_proof import OPERATOR_HEADER, acting_operator
from services.platform.bearer import BearerAuth, Unauthorized, token_of

FORBIDDEN = "a tenant's token; operator actions need an operator token (SETTLE_OPERATOR_TOKENS)"
CLAIMED_DESCRIPTION = (
    "Optional: the operator the request acts as, as the `settle` operator commands send "
    "`--operator`. It must be the bearer token's own operator, else 403 `operator_mismatch`; "
    "the operator is always the token's."
)

operator_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="operatorToken",
    description=(
        "`Authorization: Bearer <operator token>` (SETTLE_OPERATOR_TOKENS); the token names "
        "the operator the audit rows name."
    ),
)


def operator_dependency(
    operators: BearerAuth, tenants: BearerAuth | None = None
) -> Callable[..., Awaitable[str]]:
    """A FastAPI dependency giving the operator a request acts as (see the module docstring)."""
    # Defaults, not Annotated aliases: a local name is not resolvable from string annotations.
    credentials_of = Security(operator_scheme)
    named = Header(None, alias=OPERATOR_HEADER, description=CLAIMED_DESCRIPTION)

    async def acting(
        credentials: HTTPAuthorizationCredentials | None = credentials_of,
        claimed: str | None = named,
    ) -> str:
        token = token_of(credentials)
        try:
            operator = operators.tenant_for(token)
        except Unauthorized:
            if tenants is not None and token:
                tenants.tenant_for(token)  # a tenant's token: known, but not an operator's
                raise Forbidden(FORBIDDEN) from None
            raise
        return acting_operator(operator, claimed)

    return acting


def operator_of(operators: BearerAuth, tenants: BearerAuth | None = None) -> Any:
    """`operator_dependency` as a parameter's default (`operator: str = operator_of(...)`)."""
    return Depends(operator_dependency(operators, tenants))
