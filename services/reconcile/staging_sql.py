"""The statements staging.py reads a run's staged rail objects with, joined with the ledger.

$1 is always the run, [$2, $3) the window and $4 the rails whose settlements the run reads.

`OWNED` and `UNOWNED` are the two streams of a run that lists the rail's API. `JUDGED` reads a
statement's run in one statement instead (its staged objects are unique by id, staging.py
checks it): the window's settlements are matched with the staged objects their references
name in one hash join, and only what does not plainly agree leaves PostgreSQL, in parts:

    part 0  one row: how many settlements the window has (`total`)
    part 1  the settlements SQL does not find agreeing, by id, each with the staged objects it
            owns (as OWNED's rows)
    part 2  the listed objects no window settlement owns, those naming no settlement first,
            then by the settlement they name (as UNOWNED's rows, after the same columns)

A settlement agrees in SQL when the one object its reference names names it back and no other
staged object names it, the object's amount, currency, destination (when stated), money state
(`MONEY_STATE` against `compare.AGREES`, in transit left to Python for its arrival date) and,
for a transfer, amount reversed equal the ledger's, no other settlement in the ledger claims
that object, and neither it nor the object has an open break (the run may heal those). Every
such settlement is one compare() finds no break in; the rest are compared in Python. A
settlement out of `accepted` has the transition that moved it (every move writes one), so it
was sent. $5 lists the settlements left uncompared (as text): neither paged nor agreeing.
"""

from __future__ import annotations

from services.domain.reconciliation import MoneyState
from services.reconcile.compare import AGREES
from services.reconcile.ledger_source import DUE_ON

TABLE = "reconciliation_rail_staging"
COLUMNS = (
    "run_id",
    "seq",
    "listed",
    "object_id",
    "kind",
    "amount",
    "amount_reversed",
    "currency",
    "destination",
    "status",
    "created",
    "settlement_id",
    "arrival",
)
# Each (ledger status, money state) pair that agrees, as "status:state", for JUDGED's $6.
AGREEING = sorted(
    f"{status.value}:{state.value}"
    for status, states in AGREES.items()
    for state in states
    if state is not None and state is not MoneyState.IN_FLIGHT
)
# domain.reconciliation.money_state, in SQL, of the staged object `st`.
MONEY_STATE = """CASE WHEN st.kind = 'transfer' THEN
         CASE WHEN st.amount_reversed = 0 THEN 'paid'
              WHEN st.amount_reversed >= st.amount THEN 'reversed' ELSE 'partly_reversed' END
       WHEN st.status = 'paid' THEN 'paid' WHEN st.status IN ('failed', 'canceled') THEN 'failed'
       ELSE 'in_flight' END"""
_OBJECT = """st.object_id, st.kind, st.amount, st.amount_reversed, st.currency, st.destination,
       st.status, st.created, st.settlement_id, st.arrival"""
# sent_at and due_on as ledger_source reads them.
# Settlements changed since $2 (`updated_at >= $2`): each change writes a transition stamped
# as `updated_at`, and their index (0011) reads the window's rows, not every settlement.
_WINDOW = """
w AS {how} (
      SELECT s.id, s.tenant, s.amount, s.currency, s.destination, s.status, s.rail_reference,
             s.amount_reversed
        FROM settlements AS s
       WHERE s.id IN (SELECT c.settlement_id FROM settlement_transitions AS c
                       WHERE c.occurred_at >= $2)
         AND s.created_at < $3 AND s.rail = ANY($4::text[]))"""
OWNED = f"""
WITH {_WINDOW.format(how="")},
sent AS (SELECT t.settlement_id, min(t.occurred_at) AS sent_at FROM settlement_transitions AS t
          WHERE t.to_status <> 'accepted' AND t.settlement_id IN (SELECT w.id FROM w)
          GROUP BY t.settlement_id),
own AS (SELECT w.id AS owner, st.seq, {_OBJECT}
          FROM w JOIN {TABLE} AS st ON st.run_id = $1 AND st.object_id = w.rail_reference
        UNION ALL
        SELECT w.id, st.seq, {_OBJECT}
          FROM w JOIN {TABLE} AS st ON st.run_id = $1 AND st.settlement_id = w.id::text
         WHERE st.object_id IS DISTINCT FROM w.rail_reference)
SELECT w.id, w.tenant, w.amount, w.currency, w.destination, w.status, w.rail_reference,
       sent.sent_at, own.object_id AS o_id, own.kind AS o_kind, own.amount AS o_amount,
       own.amount_reversed AS o_reversed, own.currency AS o_currency,
       own.destination AS o_destination, own.status AS o_status, own.created AS o_created,
       own.settlement_id AS o_settlement_id, own.arrival AS o_arrival, w.amount_reversed,
       {DUE_ON.format(id="w.id")}
  FROM w LEFT JOIN sent ON sent.settlement_id = w.id LEFT JOIN own ON own.owner = w.id
 ORDER BY w.id, own.seq
"""
UNOWNED = f"""
WITH {_WINDOW.format(how="")}
SELECT {_OBJECT} FROM {TABLE} AS st
 WHERE st.run_id = $1 AND st.listed
   AND NOT EXISTS (SELECT 1 FROM w WHERE w.rail_reference = st.object_id)
   AND NOT EXISTS (SELECT 1 FROM w WHERE w.id::text = st.settlement_id)
 ORDER BY st.settlement_id NULLS FIRST, st.object_id, st.seq
"""
_AGREES = f"""st.settlement_id = w.id::text
     AND st.amount = w.amount AND st.currency = w.currency
     AND (st.destination IS NULL OR st.destination = w.destination)
     AND (st.kind <> 'transfer' OR st.amount_reversed = w.amount_reversed)
     AND w.status || ':' || {MONEY_STATE} = ANY($6::text[])
     AND NOT EXISTS (SELECT FROM settlements AS c
                      WHERE c.rail_reference = w.rail_reference AND c.id <> w.id)
     AND w.id NOT IN (SELECT b.settlement_id FROM reconciliation_breaks AS b
                       WHERE b.status = 'open' AND b.settlement_id IS NOT NULL)
     AND st.object_id NOT IN (SELECT b.rail_object_id FROM reconciliation_breaks AS b
                               WHERE b.status = 'open' AND b.rail_object_id IS NOT NULL)"""
_PAIR = """w.id, w.tenant, w.amount, w.currency, w.destination, w.status, w.rail_reference,
         w.amount_reversed, st.seq AS o_seq, st.listed AS o_listed, st.object_id AS o_id,
         st.kind AS o_kind, st.amount AS o_amount, st.amount_reversed AS o_reversed,
         st.currency AS o_currency, st.destination AS o_destination, st.status AS o_status,
         st.created AS o_created, st.settlement_id AS o_settlement_id, st.arrival AS o_arrival"""
_OWN = """o_id, o_kind, o_amount, o_reversed, o_currency, o_destination, o_status, o_created,
       o_settlement_id, o_arrival"""
# odd: the window's pairs that do not agree on their own, and the staged objects no window
# settlement's reference names (one hash join, kept: it is small). late: pairs that agree,
# but whose settlement one of those objects names too. d: the settlements paged.
JUDGED = f"""
WITH {_WINDOW.format(how="MATERIALIZED")},
odd AS MATERIALIZED (
  SELECT {_PAIR}
    FROM w FULL JOIN (SELECT * FROM {TABLE} WHERE run_id = $1) AS st
      ON st.object_id = w.rail_reference
   WHERE (w.id IS NULL OR w.id::text <> ALL($5::text[])) AND NOT coalesce({_AGREES}, false)),
late AS (
  SELECT {_PAIR}
    FROM w JOIN {TABLE} AS st ON st.run_id = $1 AND st.object_id = w.rail_reference
   WHERE w.id::text IN (SELECT odd.o_settlement_id FROM odd
                         WHERE odd.o_settlement_id IS DISTINCT FROM odd.id::text)
     AND w.id NOT IN (SELECT odd.id FROM odd WHERE odd.id IS NOT NULL)
     AND w.id::text <> ALL($5::text[])),
d AS (SELECT * FROM odd WHERE odd.id IS NOT NULL UNION ALL SELECT * FROM late),
own AS (SELECT d.id AS owner, d.o_seq, {_OWN} FROM d WHERE d.o_id IS NOT NULL
        UNION ALL
        SELECT d.id, odd.o_seq, {_OWN.replace("o_", "odd.o_")}
          FROM d JOIN odd ON odd.o_settlement_id = d.id::text
         WHERE odd.o_id IS DISTINCT FROM d.rail_reference)
SELECT d.id, d.tenant, d.amount, d.currency, d.destination, d.status, d.rail_reference,
       (SELECT min(t.occurred_at) FROM settlement_transitions AS t
         WHERE t.settlement_id = d.id AND t.to_status <> 'accepted') AS sent_at,
       {_OWN.replace("o_", "own.o_")}, d.amount_reversed, {DUE_ON.format(id="d.id")},
       1 AS part, NULL::bigint AS total, NULL::text AS k1, NULL::text AS k2, own.o_seq AS seq
  FROM d LEFT JOIN own ON own.owner = d.id
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, {_OWN}, NULL, NULL,
       2, NULL, o_settlement_id, o_id, o_seq
  FROM odd
 WHERE odd.id IS NULL AND odd.o_listed
   AND (o_settlement_id IS NULL
        OR (o_settlement_id NOT IN (SELECT d.id::text FROM d)
            AND o_settlement_id <> ALL($5::text[])))
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, 0, (SELECT count(*) FROM w), NULL, NULL, NULL
 ORDER BY part, id, k1 NULLS FIRST, k2, seq
"""
BY_OBJECT_IDS = f"""
SELECT {_OBJECT} FROM {TABLE} AS st
 WHERE st.run_id = $1 AND st.object_id = ANY($2::text[]) ORDER BY st.seq
"""
STILL_STAGED = (
    f"SELECT EXISTS (SELECT FROM {TABLE} WHERE run_id = $1 AND object_id = $2 AND seq = $3)"
)
CLEAR_ABANDONED = f"""
DELETE FROM {TABLE} WHERE run_id IN (
    SELECT r.id FROM reconciliation_runs AS r
     WHERE r.id IN (SELECT DISTINCT run_id FROM {TABLE}) AND r.id <> $1
       AND (r.status <> 'running' OR r.started_at < $2))
"""
