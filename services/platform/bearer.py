"""Bearer tokens at the HTTP edge: who a request's `Authorization: Bearer <token>` names (a
tenant, or an operator), compared in constant time by SHA-256, never by the token itself. A
configured token may be given as its digest alone (`sha256:<64 hex digits>`), so the
configuration need not hold the token."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Annotated

from fastapi import Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.domain.errors import ApiError

DIGEST_PREFIX = "sha256"  # a token configured as `sha256:<hex>` is given by its digest


class Unauthorized(ApiError):
    """No bearer token, or one that names no tenant: 401 with `WWW-Authenticate: Bearer`."""

    status = 401
    code = "unauthorized"


def token_digest(token: str) -> bytes:
    """The SHA-256 of a bearer token: what is compared, and kept where the token may not be."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def configured_digest(token: str) -> bytes:
    """The digest a configured token is compared by: `sha256:<64 hex digits>` is a token
    configured by its SHA-256 alone (the token itself kept out of the configuration), any
    other value a token given as it is."""
    kind, _, hexed = token.partition(":")
    if kind == DIGEST_PREFIX and len(hexed) == 64:
        try:
            return bytes.fromhex(hexed)
        except ValueError:
            pass
    return token_digest(token)


class BearerAuth:
    """Maps a bearer token to its tenant in time independent of which token, if any, matches.
    A configured token may be its SHA-256 (`configured_digest`)."""

    def __init__(self, tenant_by_token: Mapping[str, str]) -> None:
        if not all(tenant_by_token):
            raise ValueError("tenant_by_token: an empty token would let anyone in; remove it")
        # Comparing fixed-length digests hides the known tokens' lengths as well as contents.
        self._tenants = [
            (configured_digest(token), tenant) for token, tenant in tenant_by_token.items()
        ]
        self.names = frozenset(tenant_by_token.values())  # who holds a token now

    def tenant_for(self, token: str | None) -> str:
        """The tenant `token` belongs to; raise Unauthorized when it is missing or unknown."""
        if not token:
            raise Unauthorized("send Authorization: Bearer <token>")
        given = token_digest(token)
        found: str | None = None
        # No early exit: every known token is compared, so timing does not say which matched.
        for known, tenant in self._tenants:
            if hmac.compare_digest(given, known):
                found = tenant
        if found is None:
            raise Unauthorized("the bearer token is not one this ledger knows")
        return found

    def holds(self, tenant: str, digest: bytes | None) -> bool:
        """Whether `digest` (`token_digest`) is of a token `tenant` holds now."""
        held = False
        # No early exit, as in `tenant_for`.
        for known, name in self._tenants:
            if digest is not None and hmac.compare_digest(digest, known) and name == tenant:
                held = True
        return held


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case): None
    when the header is absent or names another scheme, "" when Bearer comes with no token."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="tenantToken",
    description="`Authorization: Bearer <token>`; the token names the tenant.",
)

Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]


def token_of(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The bearer token sent, or None when there is none (or another scheme was used)."""
    return None if credentials is None else credentials.credentials
