"""Errors shared by every settle service, and the tree every settle error hangs in.

    SettleError                         base of every error settle raises on purpose
    ├── ConfigError                     bad configuration, names the variable; fatal at start-up
    ├── SchemaError                     an Avro payload or schema settle cannot use; never retried
    ├── InfrastructureError             a local server (PostgreSQL, Kafka) did not start; retriable
    │   └── SupervisorError             a child process did not start or become healthy (run)
    ├── ApiError                        answered by the HTTP edge with `status` and `code`
    │   ├── StoreUnavailable            PostgreSQL out of reach; 503 with Retry-After; retriable
    │   ├── Unauthorized, BodyTooLarge  401 and 413 of the edge (platform.edge)
    │   ├── LedgerError                 ledger HTTP errors (ledger.errors)
    │   ├── InboxError                  inbox HTTP errors (inbox.errors)
    │   │   └── ClaimedEventChanged     an inbox row changed while claimed; never retried
    │   └── OperationsError             operator actions: 404, 409 refusals, 400, 403, 503
    │                                   (operations.errors)
    ├── DomainError                     a settlement rule refused the input (domain)
    │   ├── IllegalTransition
    │   ├── ReasonRequired
    │   ├── IllegalInstructionEvent     a rail instruction cannot take the event
    │   ├── IllegalResolution           an operator's resolution cannot start from that status
    │   ├── IllegalBreakTransition      a reconciliation break cannot go to that status
    │   ├── BreakNotHealable            only an operator may resolve this break
    │   └── ProposalRefused             a maker-checker move not this operator's, or too late
    ├── TransitionConflict              a settlement changed under its row lock; never retried
    ├── TransportError                  an HTTP call got no whole answer (platform.http1)
    │   ├── NotSent                     nothing was written; retriable
    │   └── AnswerLost                  written, answer lost; never retried blindly
    ├── RailLookupFailed                the rail could not be searched; retriable (adapters.stripe)
    │   └── RailLookupIncomplete        the search ran out of pages; never retried
    ├── RailReadError                   the rail could not be read (domain.rail)
    │   ├── UnreadableRailObject        a rail object that cannot be read; never retried
    │   └── RailUnreadable              the rail did not answer a read; retriable
    ├── SepaFileError                   an ISO 20022 file settle cannot use (adapters.sepa)
    │   ├── HostileFile                 XML from a bank that tries entities, a DOCTYPE, size
    │   ├── MalformedFile               a bank's report that cannot be read whole
    │   └── Pain001Refused              a payment file that fails its rules or the XSD
    ├── ReconcileError                  reconciliation (reconcile.errors)
    │   ├── RunNotRunning               a finished reconciliation run's record is final
    │   ├── BreakNotFound               no stored break has that id
    │   └── BreakChanged                a break changed under its row lock; never retried
    └── CheckError                      the invariant checker (check.errors)

Each class says with ``retriable`` whether doing the same thing again may succeed, so callers
decide retry versus give-up without matching on messages. Driver errors (asyncpg, OSError) are
sorted the same way in ``services.adapters.postgres.store_errors``, which also turns "the
database is down" into StoreUnavailable with ``raise ... from``.
"""

from __future__ import annotations


class SettleError(Exception):
    """Base of every error settle raises on purpose."""

    retriable: bool = False


class ConfigError(SettleError):
    """A configuration variable is missing or invalid; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


class SchemaError(SettleError):
    """A payload or schema cannot be encoded, decoded or resolved."""


class InfrastructureError(SettleError):
    """A local server did not start or answer in time; carries the log tail in the message."""

    retriable = True


class ApiError(SettleError):
    """An error the HTTP edge (services.platform.edge) answers with `status` and `code`;
    `field` names the bad input."""

    status: int = 500
    code: str = "internal_error"
    retry_after_seconds: int | None = None  # sent as Retry-After when set

    def __init__(self, message: str, *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code


class StoreUnavailable(ApiError):
    """PostgreSQL did not answer: nothing was stored or booked; the caller should retry later
    (503 with Retry-After at an HTTP edge)."""

    retriable = True
    status = 503
    code = "store_unavailable"
    retry_after_seconds = 2
