"""Errors of the bank simulator.

    BankSimError        base of every error the simulator raises on purpose
    ├── Refusal         a request the bank refuses; carries the HTTP status and the bank's code
    │   ├── FileRefused     not a pain.001.001.09 file, hostile XML, or too big (FF01)
    │   ├── DuplicateFile   a file whose MsgId the bank took before (DU01)
    │   ├── NotFound        no file or delivered report with that id
    │   ├── BadQuery        a cursor, limit or kind the listing cannot use
    │   └── FaultsError     a fault setting that is unknown or out of range
    ├── ReportInvalid   a report the simulator wrote breaks its XSD: a bug, never hidden
    ├── BooksUnbalanced a statement whose closing balance is not opening plus entries: a bug
    └── AnswerDropped   raised after an answer has begun, so the server drops the connection

Only a ``Refusal`` becomes an answer (``{"code", "message"}``); the bugs surface as a 500 with
a traceback, and a dropped answer as a connection closed mid-answer.
"""

from __future__ import annotations


class BankSimError(Exception):
    """Base of every error the simulator raises on purpose."""

    retriable: bool = False


class Refusal(BankSimError):
    """A request the bank refuses: its HTTP status, the bank's code, extra answer fields."""

    status: int = 400
    code: str = "REFUSED"

    def __init__(self, message: str, **fields: str) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def answer(self) -> dict[str, str]:
        """The JSON answer's body."""
        return {"code": self.code, "message": self.message, **self.fields}


class FileRefused(Refusal):
    """A file the bank does not take: it is not stored, and its MsgId stays free."""

    code = "FF01"

    def __init__(self, message: str, *, too_large: bool = False) -> None:
        super().__init__(message)
        self.status = 413 if too_large else 400


class DuplicateFile(Refusal):
    """A file whose MsgId the bank took before; the answer names the earlier file."""

    status = 409
    code = "DU01"

    def __init__(self, msg_id: str, file_id: str) -> None:
        super().__init__(f"MsgId {msg_id} was taken before as {file_id}", msg_id=msg_id)
        self.fields["file_id"] = file_id
        self.msg_id = msg_id
        self.file_id = file_id


class NotFound(Refusal):
    """No file, or no delivered report, with that id."""

    status = 404
    code = "NOT_FOUND"


class BadQuery(Refusal):
    """A listing's cursor, limit or kind that cannot be used."""

    code = "BAD_QUERY"


class FaultsError(Refusal):
    """A fault setting that the simulator does not know or cannot use."""

    code = "BAD_FAULTS"


class ReportInvalid(BankSimError):
    """A report the simulator wrote does not validate against its XSD."""


class BooksUnbalanced(BankSimError):
    """A day's closing balance is not its opening balance plus its entries."""


class AnswerDropped(BankSimError):
    """The lost-answer fault: the file is taken, then the connection is dropped mid-answer."""

    retriable = True
