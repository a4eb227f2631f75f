-- The statements one accepted settlement costs, for pgbench (-M prepared). The ledger's
-- accept transaction must keep issuing exactly these; `settle bench --scenario baseline`
-- runs this script so every other figure can be read as a ratio to what PostgreSQL itself
-- does on the machine.
\set amount random(1, 1000000)
\set shard random(0, :shards - 1)
SELECT gen_random_uuid() AS sid, gen_random_uuid() AS entry, gen_random_uuid() AS event,
       gen_random_uuid()::text AS ikey, encode(sha256(gen_random_uuid()::text::bytea), 'hex') AS rkey,
       -- pgbench reads any colon-word as a variable, so the account ids are built here.
       concat_ws(chr(58), 'bench', 'funding', 'USD') AS funding,
       concat_ws(chr(58), 'bench', 'payable', 'USD') AS payable \gset
BEGIN;
INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state, locked_until, created_at)
    VALUES ('bench', :ikey, sha256(:ikey::bytea), 'POST', '/v1/settlements', 'in_flight', now() + interval '30 seconds', now());
INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination, amount, currency, rail, metadata, status, version, created_at, updated_at)
    VALUES (:sid, 'bench', :ikey, :ikey, 'payee-bench', 'acct_bench', :amount, 'USD', 'sim', '{"order": "bench"}', 'accepted', 1, now(), now());
INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status, actor, occurred_at)
    VALUES (:sid, 1, NULL, 'accepted', 'ledger', now());
INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    VALUES (:entry, 'bench', :sid, 'accept', now());
INSERT INTO postings (entry_id, account_id, amount, currency)
    VALUES (:entry, :funding, :amount::bigint, 'USD'), (:entry, :payable, -:amount::bigint, 'USD');
UPDATE account_balances SET balance = balance + :amount WHERE account_id = :funding AND shard = :shard;
UPDATE account_balances SET balance = balance - :amount WHERE account_id = :payable AND shard = :shard;
INSERT INTO rail_instructions (settlement_id, tenant, rail, method, idempotency_key, destination, amount, currency, status, created_at, updated_at)
    VALUES (:sid, 'bench', 'sim', 'transfer', :rkey, 'acct_bench', :amount, 'USD', 'pending', now(), now());
INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
    VALUES (:event, :sid, 1, 'settlement.events', convert_to(:sid::text, 'UTF8'), decode(repeat('c3', 160), 'hex'));
UPDATE idempotency_keys SET state = 'completed', settlement_id = :sid, response_status = 201, response_body = decode(repeat('7b', 420), 'hex'), response_headers = '{}', completed_at = now(), locked_until = NULL
    WHERE tenant = 'bench' AND key = :ikey;
COMMIT;
