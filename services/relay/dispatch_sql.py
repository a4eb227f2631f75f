"""SQL of the rail dispatcher; every write to a claimed instruction checks its fence.

Status literals come from the instruction's state machine (domain/instruction.py): each
write sets the status its event leads to and expects the statuses the table gives as that
event's sources. `WRITES` names the statement of each event, so a test holds them together.
"""

from collections.abc import Mapping

from services.domain.instruction import InstructionEvent as E
from services.domain.instruction import InstructionStatus as I
from services.domain.instruction import sources_of, target_of


def _among(event: E) -> str:
    """The SQL list of the statuses `event` may start from."""
    return ", ".join(f"'{status}'" for status in sorted(sources_of(event)))


# Every statement that picks instructions picks those of one rail: each rail has its own
# dispatcher, so one rail's outage or backlog never holds another's instructions.
#
# Pass 1: pending instructions never sent, claimed with a new fence and a lease; with each, the
# trace context its settlement was accepted under, which the rail call's span continues. One
# sent before and re-armed by an operator is pass 2's: it looks at the rail before sending.
CLAIM_PENDING = f"""
UPDATE rail_instructions AS r
   SET status = '{target_of(E.CLAIM)}', fence = r.fence + 1,
       lease_until = now() + make_interval(secs => $2),
       claimed_by = $3, attempts = r.attempts + 1,
       first_sent_at = now(), updated_at = now()
  FROM settlements s
 WHERE r.settlement_id = ANY($1::uuid[]) AND r.status IN ({_among(E.CLAIM)})
   AND r.first_sent_at IS NULL AND r.rail = $4 AND s.id = r.settlement_id
RETURNING r.settlement_id, r.tenant, r.idempotency_key, r.destination, r.amount, r.currency,
          r.method, r.fence, r.attempts, false AS sent_before, 0::float8 AS sent_age,
          s.traceparent, s.tracestate
"""

# Pass 2: processing rows whose lease ran out (a crashed or stalled worker, or a retry that is
# due) and pending rows nobody claimed, taken over with the fence moved on. Where the take-over
# will look at the rail before sending (a rail that ignores keys, $5, or a key older than the
# rail's window, $6), a row whose last call may not have ended at the rail is held back $7
# seconds more: one whose holder may still have been sending when its lease ran out (no retry
# scheduled past that end), and one an operator re-armed (pending again after it was sent).
# A request written at the last moment must have ended at the rail before the lookup, or the
# lookup would miss it and the re-issue pay twice.
RECLAIM_DUE = f"""
WITH due AS (
    SELECT settlement_id, status AS was, first_sent_at AS sent_at
      FROM rail_instructions,
           LATERAL (SELECT CASE WHEN $5 OR first_sent_at < now() - make_interval(secs => $6)
                                THEN make_interval(secs => $7) ELSE interval '0' END AS hold) h
     WHERE rail = $8
       AND ((status = '{I.PROCESSING}' AND lease_until < now()
             AND (next_attempt_at >= lease_until OR lease_until < now() - h.hold))
         OR (status = '{I.PENDING}' AND created_at < now() - make_interval(secs => $3)
             AND (first_sent_at IS NULL OR updated_at < now() - h.hold)))
     ORDER BY lease_until NULLS FIRST
     LIMIT $4
       FOR UPDATE OF rail_instructions SKIP LOCKED
)
UPDATE rail_instructions AS r
   SET status = '{target_of(E.RECLAIM)}', fence = r.fence + 1,
       lease_until = now() + make_interval(secs => $1), claimed_by = $2,
       -- A lease that ran out before its holder scheduled a retry: the holder died or stalled
       -- mid-attempt, and the rail may have acted on it. Once so marked, the budget's end is
       -- needs_review, never failed.
       error_class = CASE WHEN due.was = '{I.PROCESSING}'
                           AND (r.next_attempt_at IS NULL OR r.next_attempt_at < r.lease_until)
                          THEN 'ambiguous' ELSE r.error_class END,
       attempts = r.attempts + 1, first_sent_at = coalesce(r.first_sent_at, now()),
       updated_at = now()
  FROM due JOIN settlements s ON s.id = due.settlement_id
 WHERE r.settlement_id = due.settlement_id
RETURNING r.settlement_id, r.tenant, r.idempotency_key, r.destination, r.amount, r.currency,
          r.method, r.fence, r.attempts, due.sent_at IS NOT NULL AS sent_before,
          coalesce(extract(epoch FROM now() - due.sent_at), 0)::float8 AS sent_age,
          due.was, s.traceparent, s.tracestate
"""

RECORD_TRANSFERRED_MANY = f"""
UPDATE rail_instructions AS r
   SET status = '{target_of(E.ACCEPT)}', rail_reference = c.ref, lease_until = NULL,
       next_attempt_at = NULL, updated_at = now()
  FROM unnest($1::uuid[], $2::bigint[], $3::text[]) AS c(sid, fence, ref)
 WHERE r.settlement_id = c.sid AND r.fence = c.fence AND r.status IN ({_among(E.ACCEPT)})
RETURNING r.settlement_id, c.ref
"""

RECORD_FINAL = f"""
UPDATE rail_instructions
   SET status = $3, last_error = $4,
       error_class = CASE WHEN error_class = 'ambiguous' THEN 'ambiguous' ELSE $5 END,
       lease_until = NULL, next_attempt_at = NULL, updated_at = now()
 WHERE settlement_id = $1 AND fence = $2 AND status IN ({_among(E.REFUSE)})
"""

WAS_AMBIGUOUS = "SELECT error_class = 'ambiguous' FROM rail_instructions WHERE settlement_id = $1"

# Once an attempt was ambiguous the instruction stays marked so: the budget's end must not
# call a settlement failed that the rail may have paid.
SCHEDULE_RETRY = f"""
UPDATE rail_instructions
   SET lease_until = now() + make_interval(secs => $3), next_attempt_at = now()
       + make_interval(secs => $3), last_error = $4,
       error_class = CASE WHEN error_class = 'ambiguous' THEN 'ambiguous' ELSE $5 END,
       updated_at = now()
 WHERE settlement_id = $1 AND fence = $2 AND status IN ({_among(E.SCHEDULE_RETRY)})
RETURNING error_class
"""

# The statement that writes each event; RECORD_FINAL takes the status as a parameter.
WRITES: Mapping[E, str] = {
    E.CLAIM: CLAIM_PENDING,
    E.RECLAIM: RECLAIM_DUE,
    E.SCHEDULE_RETRY: SCHEDULE_RETRY,
    E.ACCEPT: RECORD_TRANSFERRED_MANY,
    E.REFUSE: RECORD_FINAL,
    E.GIVE_UP: RECORD_FINAL,
    E.REFER: RECORD_FINAL,
}

GAUGES = f"""
SELECT count(*) FILTER (WHERE lease_until >= now()) AS in_flight,
       count(*) FILTER (WHERE lease_until < now()) AS stuck
  FROM rail_instructions WHERE status = '{I.PROCESSING}' AND rail = $1
"""

# A replica paused in the middle of sending a statement leaves its session waiting for the
# rest of the message, holding its transaction's row locks, where no PostgreSQL timeout
# reaches. Past a lease such a session belongs to a replica that has lost its claims anyway.
END_STALLED_RELAY_SESSIONS = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = current_database() AND application_name LIKE 'settle-relay%'
   AND pid <> pg_backend_pid() AND state = 'active' AND wait_event = 'ClientRead'
   AND query_start < now() - make_interval(secs => $1)
"""
