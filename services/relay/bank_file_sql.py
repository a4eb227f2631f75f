"""SQL of the SEPA rail's file dispatcher (relay/bank_files.py).

An instruction is put in a file once, in the transaction that stores the file; the file is
then uploaded under its own fence and lease, as many times as it takes, always as stored.
Status literals come from the instruction's state machine (domain/instruction.py).
"""

from services.domain.instruction import InstructionEvent as E
from services.domain.instruction import InstructionStatus as I
from services.domain.instruction import target_of

# Pending instructions of the rail not yet in a file, oldest first, with what a payment file
# names: the payee and the settlement's reference (the remittance).
DUE_FOR_A_FILE = f"""
SELECT r.settlement_id, r.destination, r.amount, r.currency, s.payee, s.reference
  FROM rail_instructions r JOIN settlements s ON s.id = r.settlement_id
 WHERE r.rail = $1 AND r.status = '{I.PENDING}' AND r.bank_file IS NULL
 ORDER BY r.created_at
 LIMIT $2
   FOR UPDATE OF r SKIP LOCKED
"""

STORE_FILE = """
INSERT INTO bank_files (msg_id, rail, content, sha256, transactions, control_sum, status,
                        built_at, updated_at, execution_date)
VALUES ($1, $2, $3, $4, $5, $6, 'built', $7, $7, $8)
"""

# The claim of pass 1, for a file: a new fence, and a lease that the file's own lease governs
# (the instruction is this file's until the bank's answer about the file is recorded).
PUT_IN_FILE = f"""
UPDATE rail_instructions
   SET status = '{target_of(E.CLAIM)}', fence = fence + 1, bank_file = $2,
       lease_until = now() + interval '30 days', claimed_by = $3, attempts = attempts + 1,
       first_sent_at = now(), updated_at = now()
 WHERE settlement_id = ANY($1::uuid[]) AND status = '{I.PENDING}' AND bank_file IS NULL
RETURNING settlement_id
"""

# Instructions that cannot be written in a file (a name the SEPA character set cannot spell):
# claimed in no file, for their refusal to be recorded under the fence.
CLAIM_UNWRITABLE = f"""
UPDATE rail_instructions
   SET status = '{target_of(E.CLAIM)}', fence = fence + 1,
       lease_until = now() + interval '1 minute', claimed_by = $2, attempts = attempts + 1,
       first_sent_at = now(), updated_at = now()
 WHERE settlement_id = ANY($1::uuid[]) AND status = '{I.PENDING}' AND bank_file IS NULL
RETURNING settlement_id, tenant, idempotency_key, destination, amount, currency, method, fence
"""

# Files to upload: built, not held by a live lease, their retry (if any) due.
CLAIM_UPLOADS = """
UPDATE bank_files AS f
   SET fence = f.fence + 1, lease_until = now() + make_interval(secs => $2), claimed_by = $3,
       attempts = f.attempts + 1, next_attempt_at = NULL, updated_at = now()
 WHERE f.msg_id IN (SELECT msg_id FROM bank_files
                     WHERE rail = $1 AND status = 'built'
                       AND (lease_until IS NULL OR lease_until < now())
                       AND (next_attempt_at IS NULL OR next_attempt_at <= now())
                     ORDER BY built_at
                     LIMIT $4
                       FOR UPDATE SKIP LOCKED)
RETURNING f.msg_id, f.content, f.fence, f.attempts
"""

RECORD_TAKEN = """
UPDATE bank_files
   SET status = 'uploaded', bank_file_id = $3, uploaded_at = now(), lease_until = NULL,
       last_error = $4, updated_at = now()
 WHERE msg_id = $1 AND fence = $2 AND status = 'built'
RETURNING msg_id
"""

RECORD_REFUSED = """
UPDATE bank_files
   SET status = 'refused', lease_until = NULL, last_error = $3, updated_at = now()
 WHERE msg_id = $1 AND fence = $2 AND status = 'built'
RETURNING msg_id
"""

# Upload again later, the same bytes: whatever the last answer was, the bank takes a MsgId once.
RETRY_UPLOAD = """
UPDATE bank_files
   SET lease_until = NULL, next_attempt_at = now() + make_interval(secs => $3), last_error = $4,
       updated_at = now()
 WHERE msg_id = $1 AND fence = $2 AND status = 'built'
RETURNING msg_id
"""

# The instructions of a file, with the fences their claim set.
IN_FILE = f"""
SELECT r.settlement_id, r.tenant, r.idempotency_key, r.destination, r.amount, r.currency,
       r.method, r.fence
  FROM rail_instructions r
 WHERE r.bank_file = $1 AND r.status = '{I.PROCESSING}'
"""

GAUGES = """
SELECT count(*) FILTER (WHERE lease_until >= now() OR lease_until IS NULL) AS in_flight,
       count(*) FILTER (WHERE lease_until < now()) AS stuck
  FROM bank_files WHERE rail = $1 AND status = 'built'
"""
