"""How a Stripe answer (or the lack of one) maps onto the rail port's outcome classes.

    answer                                                     outcome     detail
    2xx with an object id                                      ACCEPTED    "" | idempotent_replayed
    2xx without a usable id                                    AMBIGUOUS   malformed_response
    2xx whose body is not JSON                                 AMBIGUOUS   http_200
    400/402/404 invalid request, card error, missing resource  REFUSED     Stripe's code, else type
    400/404 idempotency_error (our key, other parameters)      AMBIGUOUS   idempotency_error
    401 authentication, 403 permission                         RETRYABLE   authentication_error |
                                                                           permission_error
    409 (a request under the same key is still in flight)      RETRYABLE   conflict
    429, or code rate_limit / lock_timeout                     RETRYABLE   rate_limit | lock_timeout
    5xx, any other status                                      AMBIGUOUS   code | api_error | http_N
    no connection, connect timeout, pool timeout               RETRYABLE   not_sent
    timeout or broken connection after sending                 AMBIGUOUS   timeout | network_error
    the whole-call deadline passed                             AMBIGUOUS   timeout

Choices a reviewer should know about:
- 401/403 mean our key or its permissions are wrong: Stripe did nothing, and an operator must
  fix the configuration. RETRYABLE keeps the settlement alive until they do; the detail
  names the problem so an alert can fire on it.
- ``idempotency_error`` means a request under our deterministic key already reached Stripe
  with other parameters. That earlier request may have moved money, so this is never a
  refusal (which would fail the settlement and reverse its postings): AMBIGUOUS sends it to
  lookup and review.
- A connection error counts as "not sent" only when the HTTP client says so by type:

    transport error kept as the cause of APIConnectionError                outcome     detail
    NotSent (services.platform.http1: connect refused or failed, DNS, TLS    RETRYABLE   not_sent
      handshake, connect or pool wait past its bound, a URL it cannot
      send to)
    AnswerTimeout (the call's bound passed after writing), any other       AMBIGUOUS   timeout
      TimeoutError
    AnswerLost (closed, reset, cut short, not HTTP), anything else         AMBIGUOUS   network_error

  Anything that broke mid-call may have reached Stripe.
"""

from __future__ import annotations

import stripe

from services.adapters.stripe.http import sent_nothing
from services.domain.rail import RailOutcome, RailResult

REFUSAL_STATUSES = frozenset({400, 402, 404})
RETRY_CODES = frozenset({"rate_limit", "lock_timeout"})


def outcome_of_created(response: stripe.StripeResponse) -> RailResult:
    """ACCEPTED with the created object's id; AMBIGUOUS if the answer carries no id."""
    status = response.code
    ref = response.data.get("id") if isinstance(response.data, dict) else None
    if not isinstance(ref, str) or not ref:
        return RailResult(RailOutcome.AMBIGUOUS, detail="malformed_response", status=status)
    replayed = response.headers.get("idempotent-replayed") == "true"
    detail = "idempotent_replayed" if replayed else ""
    return RailResult(RailOutcome.ACCEPTED, rail_reference=ref, detail=detail, status=status)


def outcome_of_error(err: stripe.StripeError) -> RailResult:
    """The outcome class of a Stripe error, per the table in this module's docstring."""
    status = err.http_status
    if isinstance(err, stripe.APIConnectionError):
        return _connection_failure(err)
    detail = error_code(err)
    if status == 409:
        return RailResult(RailOutcome.RETRYABLE, detail="conflict", status=status)
    if isinstance(err, stripe.RateLimitError) or detail in RETRY_CODES:
        return RailResult(RailOutcome.RETRYABLE, detail=detail, status=status)
    if isinstance(err, stripe.IdempotencyError):
        return RailResult(RailOutcome.AMBIGUOUS, detail="idempotency_error", status=status)
    if isinstance(err, stripe.AuthenticationError):
        return RailResult(RailOutcome.RETRYABLE, detail="authentication_error", status=status)
    if isinstance(err, stripe.PermissionError):
        return RailResult(RailOutcome.RETRYABLE, detail="permission_error", status=status)
    if isinstance(err, stripe.InvalidRequestError | stripe.CardError) and (
        status in REFUSAL_STATUSES
    ):
        return RailResult(RailOutcome.REFUSED, detail=detail, status=status)
    return RailResult(RailOutcome.AMBIGUOUS, detail=detail, status=status)


def error_code(err: stripe.StripeError) -> str:
    """Stripe's error code, else its error type, else the HTTP status, for the audit trail."""
    # Some error classes (RateLimitError among them) leave .code unset; the body still has it.
    body = err.error
    code = err.code or (body.code if body is not None else None)
    if code:
        return code
    if body is not None and body.type:
        return body.type
    return f"http_{err.http_status}" if err.http_status else "api_error"


def _connection_failure(err: stripe.APIConnectionError) -> RailResult:
    cause = err.__cause__
    if sent_nothing(cause):
        return RailResult(RailOutcome.RETRYABLE, detail="not_sent")
    # AnswerTimeout is a TimeoutError.
    if isinstance(cause, TimeoutError):
        return RailResult(RailOutcome.AMBIGUOUS, detail="timeout")
    return RailResult(RailOutcome.AMBIGUOUS, detail="network_error")
