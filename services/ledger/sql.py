"""The ledger's SQL for booking a batch; statements take whole columns as arrays.

`BOOK_BATCH` is the accept transaction's one round trip: data-modifying CTEs claim the
idempotency keys, insert the settlements whose key was claimed (a reference already booked
is left out), and for those alone write the first transition, the journal entry and its
postings, one balance update per account on a shard no other writer holds
(`services/domain/balance_shards.py`; $23 is the shard tried first), the rail instruction
and the outbox row. It returns, per request, whether its key was claimed and whether its
settlement was booked.
`tools/bench/baseline.py` builds its pgbench script from these very statements.

Booking is the one statement that writes `settlements` outside the guarded write path
(`services/settlement/transitions.py`), because it only inserts: a row that does not exist yet
has no status or version to guard, and its guards are the key claim and the reference's
uniqueness, which this statement checks in the same round trip as everything it books. It
books by the same rules: postings from `accept_postings`, the event from `settlement_event`.
"""

from services.domain.balance_shards import free_shards
from services.domain.instruction import InstructionStatus
from services.domain.payout import PayoutMethod
from services.platform.config import RailKind

# Every account the legs post to, once each, in code point order as balance shards are locked.
LEG_ACCOUNTS = (
    '(SELECT array_agg(DISTINCT a COLLATE "C" ORDER BY a COLLATE "C") '
    "FROM unnest($20::text[]) AS a)"
)

# A key is claimed when new, when its record is past replay + tombstone, or when an
# in-flight holder's lease ran out; the fence moves on so a late holder's write fails. The
# claim stores the 201 response minted for the request; a refused reference rewrites it.
BOOK_BATCH = f"""
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[], $4::uuid[], $5::text[],
                         $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[],
                         $11::text[], $12::text[], $13::bytea[], $14::uuid[], $15::uuid[],
                         $16::bytea[], $26::text[], $27::text[])
        AS i(tenant, key, fp, sid, ref, payee, dest, amount, cur, rail, meta, rkey, body,
             entry, event, payload, tp, ts)
), claimed AS (
    INSERT INTO idempotency_keys AS k
           (tenant, key, fingerprint, method, path, state, fence, settlement_id,
            response_status, response_body, created_at, completed_at)
    SELECT tenant, key, fp, 'POST', '/v1/settlements', 'completed', 1, sid, 201, body,
           $17, $17
      FROM input ORDER BY tenant, key
    ON CONFLICT (tenant, key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, state = 'completed', fence = k.fence + 1,
           locked_until = NULL, settlement_id = EXCLUDED.settlement_id,
           response_status = 201, response_body = EXCLUDED.response_body,
           response_headers = NULL, created_at = EXCLUDED.created_at,
           completed_at = EXCLUDED.completed_at
     WHERE k.created_at <= $18 OR (k.state = 'in_flight' AND k.locked_until <= $17)
    RETURNING tenant, key
), settled AS (
    INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
                             amount, currency, rail, metadata, status, version, created_at,
                             updated_at, traceparent, tracestate)
    SELECT i.sid, i.tenant, i.ref, i.key, i.payee, i.dest, i.amount, i.cur, i.rail,
           i.meta::jsonb, 'accepted', 1, $17, $17, i.tp, i.ts
      FROM input i JOIN claimed c ON c.tenant = i.tenant AND c.key = i.key
     ORDER BY i.tenant, i.ref
    ON CONFLICT (tenant, reference) DO NOTHING
    RETURNING id
), booked AS (
    SELECT i.* FROM input i JOIN settled s ON s.id = i.sid
), transitions AS (
    INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status,
                                        actor, occurred_at)
    SELECT sid, 1, NULL, 'accepted', 'ledger', $17 FROM booked
), entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    SELECT entry, tenant, sid, 'accepted', $17 FROM booked
), legs AS (
    SELECT l.* FROM unnest($19::uuid[], $20::text[], $21::bigint[], $22::text[])
                    AS l(entry, account, amount, cur)
      JOIN booked b ON b.entry = l.entry
), posted AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT entry, account, amount, cur, $17 FROM legs
), shards AS MATERIALIZED ({free_shards(LEG_ACCOUNTS, "$23::int")}
), balances AS (
    UPDATE account_balances AS b SET balance = b.balance + d.delta
      FROM (SELECT account, sum(amount) AS delta FROM legs GROUP BY account) AS d
      JOIN shards s ON s.account_id = d.account
     WHERE b.account_id = d.account AND b.shard = s.shard
), instructions AS (
    INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key,
                                   destination, amount, currency, status, created_at,
                                   updated_at)
    -- The Stripe method is for the rails that speak Stripe's API; SEPA pays by transfer.
    SELECT sid, tenant, rail,
           CASE WHEN rail = '{RailKind.SEPA}' THEN '{PayoutMethod.TRANSFER}' ELSE $24::text END,
           rkey, dest, amount, cur, '{InstructionStatus.PENDING}', $17, $17
      FROM booked
), events AS (
    INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
    SELECT event, sid, 1, $25, convert_to(sid::text, 'UTF8'), payload FROM booked
)
SELECT i.tenant, i.key, c.key IS NOT NULL AS claimed, s.id IS NOT NULL AS booked
  FROM input i
  LEFT JOIN claimed c ON c.tenant = i.tenant AND c.key = i.key
  LEFT JOIN settled s ON s.id = i.sid
"""

# A claimed key whose reference was already booked under another key answers 409 forever.
REFUSE_REFERENCES = """
UPDATE idempotency_keys AS k
   SET settlement_id = NULL, response_status = 409, response_body = u.body
  FROM unnest($1::text[], $2::text[], $3::bytea[]) AS u(t, key, body)
 WHERE k.tenant = u.t AND k.key = u.key
"""

READ_KEYS = """
SELECT k.tenant, k.key, k.fingerprint, k.state, k.created_at, k.locked_until,
       k.response_status, k.response_body, k.settlement_id, s.traceparent, s.tracestate
  FROM idempotency_keys k
  JOIN unnest($1::text[], $2::text[]) AS u(t, key) ON k.tenant = u.t AND k.key = u.key
  LEFT JOIN settlements s ON s.id = k.settlement_id
"""
