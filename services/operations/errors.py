"""Errors of operator actions; each carries the HTTP status and the machine-readable code the
HTTP routes and `settle review|breaks` answer with.

OperationsError (ApiError)      base; nothing was changed when one is raised
├── NotFound                    404: no settlement or break with that id
├── Refused                     409: the action is not allowed now; `code` says why
│                                    (rail_disagrees, not_in_review, attempt_in_flight,
│                                    break_closed, instruction_status; on a break:
│                                    no_amount, wrong_break_type, wrong_currency,
│                                    illegal_correction, in_review, reference_taken,
│                                    object_claimed, not_resolved, open_break_of_key,
│                                    not_proposed)
├── ReasonMissing               400 `reason_required`: an operator action needs a reason
├── BadRequest                  400: a parameter or body that cannot be read; `field` names it
│                                    (e.g. unknown_account, invalid_amount, invalid_as)
├── Forbidden                   403 `forbidden`: a token that is not an operator's
└── RailUnavailable             503 `rail_unreadable`: the rail could not be asked; retriable
"""

from __future__ import annotations

from services.domain.errors import ApiError


class OperationsError(ApiError):
    """Base of the operator actions' errors; nothing was changed."""


class NotFound(OperationsError):
    """No settlement or break has that id."""

    status = 404
    code = "not_found"


class Refused(OperationsError):
    """The action is refused as things stand; `code` names the rule that refused it."""

    status = 409
    code = "refused"


class ReasonMissing(OperationsError):
    """An operator action came without a reason; the audit trail must say why."""

    status = 400
    code = "reason_required"

    def __init__(self, message: str = 'say why: --reason TEXT, or "reason" in the body'):
        super().__init__(message, field="reason")


class BadRequest(OperationsError):
    """A parameter or body that cannot be read; `code` and `field` name it."""

    status = 400
    code = "invalid_request"


class Forbidden(OperationsError):
    """The bearer token is a tenant's, not an operator's."""

    status = 403
    code = "forbidden"


class RailUnavailable(OperationsError):
    """The rail could not be asked; its silence is never taken as agreement."""

    retriable = True
    status = 503
    code = "rail_unreadable"
    retry_after_seconds = 5
