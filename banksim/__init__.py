"""The bank simulator: a SEPA bank's host-to-host file API, for local runs, tests and chaos.

settle's SEPA rail uploads pain.001 files and reads pain.002, camt.054 and camt.053 reports;
this bank takes the files, books them on a fast TARGET2 calendar, returns and charges some,
and misbehaves on purpose by a seeded fault profile. Its state is on disk, so a restart
forgets nothing, and `GET /v1/effects` counts what it paid per EndToEndId. The HTTP contract
is /work/notes/bank_api.md.

bank.Bank           the bank: state, clock and faults behind one lock; days turned on demand
intake              a file taken: kept, deduplicated by MsgId, fates decided, pain.002 issued
booking             a day's work: blocks booked, returns credited, camt.054 and pain.002 ACSC
statements          a day's end: a camt.053 per account, balances and sequence numbers
ledger              accounts and entries; the effects per EndToEndId
reports             reports kept and delivered in order, some late or held back
outcomes, dice      what befalls a transfer: remittance conventions first, seeded dice after
faults              fault settings and the named profiles
clock               business dates and times of day from wall time
pain001, pain002, camt, entries, iso, schemas   the ISO 20022 messages, held to their XSDs
payment_files       pain.001 files made by hand, for tests and the shell
http, control, app  the API, the /_control endpoints, the composition root
cli.banksim         `settle banksim`
"""
