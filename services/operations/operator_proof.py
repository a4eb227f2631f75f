"""Who an operator request acts as: the operator whose token it carries, and no one else.

The operator commands send the name they were given (`--operator`, `--actor`) in the
`Settle-Operator` header; the server takes the operator from the bearer token alone, and
refuses a request that names another operator, so a typed name never passes for a
different person: one operator cannot both propose and approve by typing two names.
"""

from __future__ import annotations

from services.operations.errors import Forbidden

OPERATOR_HEADER = "Settle-Operator"  # the header naming who the caller says they are
MISMATCH = "operator_mismatch"


def acting_operator(token_holder: str, claimed: str | None) -> str:
    """The operator a request acts as: `token_holder`; Forbidden (`operator_mismatch`) when
    the request names (`claimed`) another one."""
    if claimed is not None and claimed != token_holder:
        raise Forbidden(
            f"the bearer token is not one of {claimed!r}'s: act with your own token",
            code=MISMATCH,
        )
    return token_holder
