"""Reading the values of one ISO 20022 document: elements found by plain paths ("GrpHdr/MsgId")
in the document's namespace, so one reader serves every version of a message whose shape
did not change, and every value checked as it is read.

A value that must be there and is not, or that cannot be read, raises MalformedFile naming
the element, its line and the problem: a file is read whole or refused. Amounts are read as
decimal text into integer minor units (cents): at most two decimals, no sign, no exponent, so
a float never touches money and nothing is rounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

from lxml import etree

from services.adapters.sepa.errors import MalformedFile

_AMOUNT = re.compile(r"([0-9]{1,18})(?:\.([0-9]{1,2}))?")
_WHOLE = re.compile("[0-9]{1,18}")
_DATE = re.compile("[0-9]{4}-[0-9]{2}-[0-9]{2}")
_BEYOND_MICROSECONDS = re.compile(r"(\.[0-9]{6})[0-9]+")
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def where(element: etree._Element) -> str:
    """An element's local name and line, for a message: `Ntry (line 42)`."""
    return f"{etree.QName(element).localname} (line {element.sourceline})"


def minor_units(text: str, element: etree._Element) -> int:
    """A decimal amount as integer minor units; MalformedFile unless it is digits with at
    most two decimals."""
    match = _AMOUNT.fullmatch(text)
    if match is None:
        raise MalformedFile(
            f"{where(element)}: {text!r} is not an amount with at most two decimals"
        )
    whole, cents = match.group(1), match.group(2) or ""
    return int(whole) * 100 + int(cents.ljust(2, "0"))


@dataclass(frozen=True, slots=True)
class Reader:
    """Reads the elements of one document in `namespace`."""

    namespace: str

    def _path(self, path: str) -> str:
        return "/".join(f"{{{self.namespace}}}{step}" for step in path.split("/"))

    def find(self, element: etree._Element, path: str) -> etree._Element | None:
        """The first element at `path` below `element`, or None."""
        return element.find(self._path(path))

    def findall(self, element: etree._Element, path: str) -> list[etree._Element]:
        """Every element at `path` below `element`, in document order."""
        return element.findall(self._path(path))

    def need_all(self, element: etree._Element, path: str) -> list[etree._Element]:
        """Every element at `path`, at least one; MalformedFile if there is none."""
        found = self.findall(element, path)
        if not found:
            raise MalformedFile(f"{where(element)} has no {path}")
        return found

    def need(self, element: etree._Element, path: str) -> etree._Element:
        """The element at `path`; MalformedFile if there is none."""
        found = self.find(element, path)
        if found is None:
            raise MalformedFile(f"{where(element)} has no {path}")
        return found

    def optional(self, element: etree._Element, path: str) -> str | None:
        """The trimmed text at `path`; None if the element is absent; MalformedFile if empty."""
        found = self.find(element, path)
        if found is None:
            return None
        text = (found.text or "").strip()
        if not text:
            raise MalformedFile(f"{where(found)} is empty")
        return text

    def text(self, element: etree._Element, path: str) -> str:
        """The trimmed, non-empty text at `path`; MalformedFile if absent or empty."""
        text = self.optional(element, path)
        if text is None:
            raise MalformedFile(f"{where(element)} has no {path}")
        return text

    def amount(self, element: etree._Element, path: str) -> tuple[int, str]:
        """The amount at `path` in minor units, with its `Ccy`; MalformedFile if either is
        missing or unreadable."""
        found = self.need(element, path)
        currency = found.get("Ccy")
        if currency is None or not re.fullmatch("[A-Z]{3}", currency):
            raise MalformedFile(f"{where(found)} has no three-letter Ccy")
        return minor_units((found.text or "").strip(), found), currency

    def whole_number(self, element: etree._Element, path: str) -> int | None:
        """The non-negative integer at `path`, or None if absent."""
        text = self.optional(element, path)
        if text is None:
            return None
        if not _WHOLE.fullmatch(text):
            raise MalformedFile(f"{where(element)}: {path} {text!r} is not a whole number")
        return int(text)

    def flag(self, element: etree._Element, path: str) -> bool | None:
        """The xs:boolean at `path`, or None if absent."""
        text = self.optional(element, path)
        if text is None:
            return None
        if text not in _BOOLEANS:
            raise MalformedFile(f"{where(element)}: {path} {text!r} is not true or false")
        return _BOOLEANS[text]

    def date_at(self, element: etree._Element, path: str) -> date:
        """The ISO date (YYYY-MM-DD) at `path`; MalformedFile if absent or not one."""
        text = self.text(element, path)
        if _DATE.fullmatch(text):
            try:
                return date.fromisoformat(text)
            except ValueError:
                pass  # 2026-02-30: the shape of a date, but none
        raise MalformedFile(f"{where(element)}: {path} {text!r} is not a date")

    def moment(self, element: etree._Element, path: str) -> datetime | None:
        """The ISO date-time at `path` (naive if the file gives no offset), or None if absent."""
        text = self.optional(element, path)
        if text is None:
            return None
        try:
            # Python reads at most six decimals of a second; some banks write nine.
            return datetime.fromisoformat(_BEYOND_MICROSECONDS.sub(r"\1", text))
        except ValueError:
            raise MalformedFile(f"{where(element)}: {path} {text!r} is not a date-time") from None

    def day(self, element: etree._Element, path: str) -> date | None:
        """The date of a date-or-date-time choice at `path` (`Dt`, or `DtTm`'s date), or None
        if the choice is absent."""
        choice = self.find(element, path)
        if choice is None:
            return None
        if self.find(choice, "Dt") is not None:
            return self.date_at(choice, "Dt")
        moment = self.moment(choice, "DtTm")
        if moment is None:
            raise MalformedFile(f"{where(choice)} has neither Dt nor DtTm")
        return moment.date()

    def code(self, element: etree._Element, path: str) -> str | None:
        """The code of a code-or-proprietary choice at `path` (`Cd`, else `Prtry`), or None
        if the choice is absent."""
        choice = self.find(element, path)
        if choice is None:
            return None
        code = self.optional(choice, "Cd") or self.optional(choice, "Prtry")
        if code is None:
            raise MalformedFile(f"{where(choice)} has neither Cd nor Prtry")
        return code
