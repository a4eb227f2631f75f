"""Bearer tokens to tenants: who is calling, decided without leaking which tokens exist."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from services.ledger.errors import LedgerError


class Unauthorized(LedgerError):
    """No bearer token, or one that names no tenant: 401 with `WWW-Authenticate: Bearer`."""

    status = 401
    code = "unauthorized"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class BearerAuth:
    """Maps a bearer token to its tenant in time independent of which token, if any, matches."""

    def __init__(self, tenant_by_token: Mapping[str, str]) -> None:
        if not all(tenant_by_token):
            raise ValueError("tenant_by_token: an empty token would let anyone in; remove it")
        # Comparing fixed-length digests hides the known tokens' lengths as well as contents.
        self._tenants = [(_digest(token), tenant) for token, tenant in tenant_by_token.items()]

    def tenant_for(self, token: str | None) -> str:
        """The tenant `token` belongs to; raise Unauthorized when it is missing or unknown."""
        if not token:
            raise Unauthorized("send Authorization: Bearer <token>")
        given = _digest(token)
        found: str | None = None
        # No early exit: every known token is compared, so timing does not say which matched.
        for known, tenant in self._tenants:
            if hmac.compare_digest(given, known):
                found = tenant
        if found is None:
            raise Unauthorized("the bearer token is not one this ledger knows")
        return found
