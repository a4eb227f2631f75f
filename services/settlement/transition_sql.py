"""The statements of the one guarded write (transitions.py): the settlements locked in id
order, where a settlement under review holds its money, and every row of a batch of moves
written in one statement: guarded updates, audit rows, entries, postings, balances, events."""

from __future__ import annotations

from services.domain.balance_shards import free_shards

# Accounts with their balance shards, opened where missing (booking, a rail's charges).
OPEN_ACCOUNTS = """
WITH opened AS (
    INSERT INTO accounts (id, tenant, kind, currency)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])
    ON CONFLICT DO NOTHING
)
INSERT INTO account_balances (account_id, shard)
SELECT a, s FROM unnest($1::text[]) AS a, generate_series(0, $5::int - 1) AS s
ON CONFLICT DO NOTHING
"""

LOCK_SETTLEMENTS = """
SELECT id, tenant, reference, amount, currency, status, version, rail_reference, amount_reversed,
       destination, rail, traceparent, tracestate, created_at
  FROM settlements WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
# A settlement under review keeps its money where it was; its postings say where that is.
HELD_IN = """
SELECT e.settlement_id, p.account_id FROM postings p JOIN journal_entries e ON e.id = p.entry_id
 WHERE e.settlement_id = ANY($1::uuid[])
 GROUP BY e.settlement_id, p.account_id HAVING sum(p.amount) > 0
"""
WRITE_TRANSITIONS = f"""
WITH moved AS (
    UPDATE settlements AS s
       SET status = m.status, version = m.version, reason = coalesce(m.reason, s.reason),
           amount_reversed = m.amount_reversed,
           rail_reference = coalesce(m.rail_reference, s.rail_reference), updated_at = $1
      FROM unnest($2::settlement_move[]) AS m
     WHERE s.id = m.id AND s.status = m.from_status AND s.version = m.from_version
    RETURNING s.id
), audit AS (
    INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status,
                                        reason, actor, occurred_at)
    SELECT t.settlement_id, t.sequence, t.from_status, t.to_status, t.reason, t.actor, $1
      FROM unnest($3::transition_row[]) AS t
), entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at, effective_at)
    SELECT j.id, j.tenant, j.settlement_id, j.kind, $1, j.effective_at
      FROM unnest($4::entry_row[]) AS j
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT p.entry_id, p.account_id, p.amount, p.currency, $1 FROM unnest($5::posting_row[]) AS p
), shards AS MATERIALIZED ({free_shards("$6::text[]", "$10::int")}
), balances AS (
    UPDATE account_balances AS b SET balance = b.balance + d.delta
      FROM unnest($6::text[], $7::bigint[]) AS d(account_id, delta)
      JOIN shards USING (account_id)
     WHERE b.account_id = d.account_id AND b.shard = shards.shard
), events AS (
    INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
    SELECT o.event_id, o.settlement_id, o.sequence, $8, convert_to(o.settlement_id::text, 'UTF8'),
           o.payload
      FROM unnest($9::event_row[]) AS o
)
SELECT count(*) FROM moved
"""
