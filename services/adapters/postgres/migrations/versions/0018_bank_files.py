"""The SEPA rail's files: payment files as built and uploaded, and the bank's reports as
received.

`bank_files` keeps each pain.001 exactly as built, under its MsgId, before any upload: every
upload of it, the first and each one after a lost answer, sends these bytes, so the bank
(which refuses a repeated MsgId, DU01) can never take the same payments twice. A file is
`built`, then `uploaded` once the bank took it (or said DU01: it has it), or `refused` when
the bank refused it as a file (it took nothing). Its uploader holds it under a fence and a
lease, as the dispatcher holds an instruction.

`rail_instructions.bank_file` names the one file an instruction is in. An instruction is put
in a file once, in the transaction that builds the file, and never in a second one.

`bank_reports` keeps every report the bank issued (pain.002 status reports, camt.054
notifications, camt.053 statements) under the bank's id, stored before anything of it is
read, with what became of it: `applied` (each transaction went through the inbox's rules),
or `parked` with the reason (malformed or hostile XML, never half-applied). A report is
stored once per kind and MsgId. `bank_cursors` is where the poller has read up to.

New tables, and a nullable column without default on `rail_instructions`, whose brief lock
reads no row. The downgrade drops them.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATEMENTS = (
    """
    CREATE TABLE bank_files (
        msg_id          text PRIMARY KEY CHECK (length(msg_id) BETWEEN 1 AND 35),
        rail            text NOT NULL,
        content         bytea NOT NULL,
        sha256          text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
        transactions    integer NOT NULL CHECK (transactions > 0),
        control_sum     bigint NOT NULL CHECK (control_sum > 0),
        status          text NOT NULL CHECK (status IN ('built', 'uploaded', 'refused')),
        bank_file_id    text,
        fence           bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
        lease_until     timestamptz,
        claimed_by      text,
        attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
        next_attempt_at timestamptz,
        last_error      text,
        built_at        timestamptz NOT NULL,
        uploaded_at     timestamptz,
        updated_at      timestamptz NOT NULL,
        CHECK (status <> 'uploaded' OR uploaded_at IS NOT NULL)
    )
    """,
    "CREATE INDEX bank_files_to_upload ON bank_files (next_attempt_at) WHERE status = 'built'",
    """ALTER TABLE rail_instructions
         ADD COLUMN bank_file text REFERENCES bank_files (msg_id)""",
    """CREATE INDEX rail_instructions_bank_file ON rail_instructions (bank_file)
       WHERE bank_file IS NOT NULL""",
    """
    CREATE TABLE bank_reports (
        report_id     text PRIMARY KEY,
        rail          text NOT NULL,
        kind          text NOT NULL CHECK (kind IN ('pain.002', 'camt.054', 'camt.053')),
        msg_id        text,
        business_date date,
        content       bytea NOT NULL,
        status        text NOT NULL CHECK (status IN ('stored', 'applied', 'parked')),
        reason        text,
        received_at   timestamptz NOT NULL,
        applied_at    timestamptz,
        CHECK (status <> 'parked' OR reason IS NOT NULL)
    )
    """,
    """CREATE UNIQUE INDEX bank_reports_message ON bank_reports (rail, kind, msg_id)
       WHERE msg_id IS NOT NULL""",
    "CREATE INDEX bank_reports_stored ON bank_reports (received_at) WHERE status = 'stored'",
    """
    CREATE TABLE bank_cursors (
        rail       text NOT NULL,
        listing    text NOT NULL CHECK (listing IN ('reports', 'files')),
        position   text NOT NULL,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (rail, listing)
    )
    """,
)


def upgrade() -> None:
    for statement in STATEMENTS:
        op.execute(statement)


def downgrade() -> None:
    op.execute("DROP TABLE bank_cursors")
    op.execute("DROP TABLE bank_reports")
    op.execute("ALTER TABLE rail_instructions DROP COLUMN bank_file")
    op.execute("DROP TABLE bank_files")
