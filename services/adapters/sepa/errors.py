"""Errors of the SEPA rail's files, hung under settle's one tree (services.domain.errors):

    SettleError
    └── SepaFileError           a SEPA file settle cannot read or write; never retried
        ├── HostileFile         XML built to attack its reader: a DOCTYPE (entity expansion,
        │                       external entities), or more bytes than the cap
        ├── MalformedFile       not well-formed XML, or an ISO 20022 message that lacks what
        │                       it must hold or holds what cannot be read (an amount with three
        │                       decimals, an unknown status, a namespace settle does not read)
        └── Pain001Refused      a batch that cannot be written as a valid pain.001.001.09 (an
                                IBAN outside SEPA, a name outside the SEPA character set, a
                                breach of the XSD): no file is returned

Reading the same bytes again fails the same way, so none is retriable. Each carries `reason`,
a line fit to store beside the file in the audit trail.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.domain.errors import SettleError


class SepaFileError(SettleError):
    """A SEPA file settle cannot read or write; `reason` says why, in one storable line."""

    retriable = False

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HostileFile(SepaFileError):
    """A file refused unread: a DOCTYPE (entities), or more bytes than the cap."""


class MalformedFile(SepaFileError):
    """A file that is not well-formed, or not an ISO 20022 message settle can read whole."""


class Pain001Refused(SepaFileError):
    """A batch that cannot be written as a valid pain.001.001.09; `reasons` lists every
    problem found (each a line naming the transfer or the XSD path)."""

    def __init__(self, reasons: Sequence[str]) -> None:
        super().__init__("the pain.001 cannot be written: " + "; ".join(reasons))
        self.reasons = tuple(reasons)
