"""The ledger's SQL for booking a batch; each statement takes whole columns as arrays.

`services/bench/accept_settlement.pgbench.sql` issues these same statements for the
`baseline` benchmark: change one, change the other.
"""

# A key is claimed when it is new, when its record is past replay + tombstone, or when an
# in-flight holder's lease ran out; the fence moves on so a late holder's write fails.
CLAIM_KEYS = """
INSERT INTO idempotency_keys AS k
       (tenant, key, fingerprint, method, path, state, fence, locked_until, created_at)
SELECT t, key, f, 'POST', '/v1/settlements', 'in_flight', 1, $5, $4
  FROM unnest($1::text[], $2::text[], $3::bytea[]) AS u(t, key, f)
 ORDER BY t, key
ON CONFLICT (tenant, key) DO UPDATE
   SET fingerprint = EXCLUDED.fingerprint, state = 'in_flight', fence = k.fence + 1,
       locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
       settlement_id = NULL, response_status = NULL, response_body = NULL,
       response_headers = NULL, completed_at = NULL
 WHERE k.created_at < $6 OR (k.state = 'in_flight' AND k.locked_until < $4)
RETURNING tenant, key, fence
"""

READ_KEYS = """
SELECT k.tenant, k.key, k.fingerprint, k.state, k.created_at, k.locked_until,
       k.response_status, k.response_body, k.settlement_id
  FROM idempotency_keys k
  JOIN unnest($1::text[], $2::text[]) AS u(t, key) ON k.tenant = u.t AND k.key = u.key
"""

INSERT_SETTLEMENTS = """
INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination, amount,
                         currency, rail, metadata, status, version, created_at, updated_at)
SELECT id, t, ref, key, payee, dest, amount, cur, rail, meta::jsonb, 'accepted', 1, $11, $11
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
              $7::bigint[], $8::text[], $9::text[], $10::text[])
       AS u(id, t, ref, key, payee, dest, amount, cur, rail, meta)
 ORDER BY t, ref
ON CONFLICT (tenant, reference) DO NOTHING
RETURNING id
"""

INSERT_FIRST_TRANSITIONS = """
INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status, actor,
                                    occurred_at)
SELECT id, 1, NULL, 'accepted', 'ledger', $2 FROM unnest($1::uuid[]) AS u(id)
"""

OPEN_ACCOUNTS = """
WITH opened AS (
    INSERT INTO accounts (id, tenant, kind, currency)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
    ON CONFLICT DO NOTHING
    RETURNING id
)
INSERT INTO account_balances (account_id, shard)
SELECT a, s FROM unnest($1::text[]) AS a, generate_series(0, $5::int - 1) AS s
ON CONFLICT DO NOTHING
"""

INSERT_ENTRIES = """
INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
SELECT id, t, sid, $4, $5 FROM unnest($1::uuid[], $2::text[], $3::uuid[]) AS u(id, t, sid)
"""

INSERT_POSTINGS = """
INSERT INTO postings (entry_id, account_id, amount, currency)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[])
"""

# Accounts arrive sorted, so concurrent batches take row locks in one order: no deadlock.
ADD_TO_BALANCES = """
UPDATE account_balances AS b SET balance = b.balance + d.delta
  FROM unnest($1::text[], $3::bigint[]) AS d(account_id, delta)
 WHERE b.account_id = d.account_id AND b.shard = $2
"""

INSERT_RAIL_INSTRUCTIONS = """
INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key,
                               destination, amount, currency, status, created_at, updated_at)
SELECT sid, t, rail, $4, key, dest, amount, cur, 'pending', $9, $9
  FROM unnest($1::uuid[], $2::text[], $3::text[], $5::text[], $6::text[], $7::bigint[],
              $8::text[]) AS u(sid, t, rail, key, dest, amount, cur)
"""

INSERT_OUTBOX = """
INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
SELECT eid, sid, 1, $3, mkey, payload
  FROM unnest($1::uuid[], $2::uuid[], $4::bytea[], $5::bytea[]) AS u(eid, sid, mkey, payload)
"""

COMPLETE_KEYS = """
UPDATE idempotency_keys AS k
   SET state = 'completed', response_status = u.status, response_body = u.body,
       settlement_id = u.sid, completed_at = $7, locked_until = NULL
  FROM unnest($1::text[], $2::text[], $3::bigint[], $4::smallint[], $5::bytea[], $6::uuid[])
       AS u(t, key, fence, status, body, sid)
 WHERE k.tenant = u.t AND k.key = u.key AND k.fence = u.fence AND k.state = 'in_flight'
"""
