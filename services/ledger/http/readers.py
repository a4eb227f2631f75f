"""Who may read: the caller's tenant, from its bearer token, once it has a read token left."""

# No `from __future__ import annotations`: FastAPI must see the dependency's `Credentials`
# annotation as an object, not as a string it would try to resolve in module globals.

from collections.abc import Awaitable, Callable

from services.ledger.admission import Admission
from services.platform.bearer import BearerAuth, Credentials, token_of

Reader = Callable[..., Awaitable[str]]  # a FastAPI dependency giving the reading tenant
# The 429 every read may answer, for its OpenAPI `responses`.
READ_LIMITED = "`rate_limited`: over the tenant's read rate; retry after `Retry-After`."


def reader_dependency(auth: BearerAuth, admission: Admission) -> Reader:
    """A FastAPI dependency giving the caller's tenant: Unauthorized (401) without a known
    token, RateLimited (429) once the tenant's reads are over its read rate."""

    async def reader(credentials: Credentials) -> str:
        tenant = auth.tenant_for(token_of(credentials))
        admission.throttle_read(tenant)
        return tenant

    return reader
