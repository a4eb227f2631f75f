"""Who an operator command acts as, in two-person mode.

A command line names its operator (`--operator`, `--actor`); a typed name proves nothing, and
two typed names would let one person both propose and approve. So in two-person mode the
command must also hold that operator's own token in `SETTLE_OPERATOR_TOKEN` (one of theirs in
SETTLE_OPERATOR_TOKENS), as the console and the HTTP routes prove it by sign-in or bearer.
"""

from __future__ import annotations

from services.operations.approval_policy import policy_of
from services.operations.errors import Refused
from services.platform.authority import OperatorSection
from services.platform.edge import BearerAuth, Unauthorized

OPERATOR_TOKEN = "SETTLE_OPERATOR_TOKEN"
UNPROVEN = "operator_unproven"


def prove_operator(settings: OperatorSection, operator: str, token: str | None) -> None:
    """In two-person mode, refuse (Refused `operator_unproven`) unless `token` is one of
    `operator`'s; outside it, the named operator is taken at its word, as before."""
    if not policy_of(settings).two_person:
        return
    if not token:
        raise Refused(
            f"two-person mode: set {OPERATOR_TOKEN} to your operator token to act as {operator!r}",
            code=UNPROVEN,
        )
    try:
        holder = BearerAuth(settings.operator_by_token).tenant_for(token)
    except Unauthorized:
        raise Refused(f"{OPERATOR_TOKEN} is not an operator's token", code=UNPROVEN) from None
    if holder != operator:
        raise Refused(f"{OPERATOR_TOKEN} is not a token of {operator!r}", code=UNPROVEN)
