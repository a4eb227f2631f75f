"""Choosing the balance shard each account's delta lands on, so writers do not queue.

An account's balance is spread over `BALANCE_SHARDS` rows summed on read, so any shard of
an account takes a delta as well as another. Every settlement moves money on a few shared
accounts (funding, in transit, paid out per currency); a writer that picked a fixed shard
would wait for whichever concurrent batch holds that row. Instead each account of a batch
takes the first shard no other transaction holds (`FOR UPDATE SKIP LOCKED`), starting at
the writer's preferred shard, and waits only when every shard of the account is held, then
on the preferred one.

Deadlock-free: accounts are locked one after another in account id order, a skipping try
never waits, so a writer waiting on account X holds balance rows of accounts before X only.
"""

from __future__ import annotations

BALANCE_SHARDS = 8


def free_shards(accounts: str, start: str) -> str:
    """SQL rows (account_id, shard), one per account of the sorted, distinct text[]
    expression `accounts`, each shard row locked: a free one from `start` on, or `start`."""
    # The subqueries run once per account, in array order; COALESCE evaluates the waiting
    # one only when the skipping one found no free shard.
    return f"""
SELECT a.account_id, coalesce(
       (SELECT b.shard FROM account_balances b
         WHERE b.account_id = a.account_id
         ORDER BY b.shard < {start}, b.shard LIMIT 1 FOR UPDATE SKIP LOCKED),
       (SELECT b.shard FROM account_balances b
         WHERE b.account_id = a.account_id AND b.shard = {start} FOR UPDATE)) AS shard
  FROM unnest({accounts}) WITH ORDINALITY AS a(account_id, n)
 ORDER BY a.n
"""
