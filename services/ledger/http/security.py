"""The bearer-token dependency: FastAPI documents the scheme, BearerAuth decides the tenant."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.ledger.auth import BearerAuth

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="tenantToken",
    description="`Authorization: Bearer <token>`; the token names the tenant.",
)

Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]


def token_of(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The bearer token sent, or None when there is none (or another scheme was used)."""
    return None if credentials is None else credentials.credentials


def tenant_dependency(auth: BearerAuth) -> Callable[..., Awaitable[str]]:
    """A dependency giving the caller's tenant, raising Unauthorized (401) otherwise."""

    async def tenant(credentials: Credentials) -> str:
        return auth.tenant_for(token_of(credentials))

    return tenant
