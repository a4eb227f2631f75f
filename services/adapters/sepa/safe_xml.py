"""Parsing XML that comes from a bank (or from anyone who can reach the endpoint that takes
it) without letting it attack the reader.

A bank file is data: it never needs a DTD. So a file whose bytes hold `<!DOCTYPE` (in UTF-8,
UTF-16 or UTF-32) is refused before it is parsed, as is a file above the size cap. The parser
then resolves no entity, loads no DTD, touches no network and keeps libxml2's limits on
depth, text size and entity amplification (no `huge_tree`); a DOCTYPE that slipped past the
byte scan in some other encoding is refused after parsing, before anyone reads a value.
Comments and processing instructions are dropped, so an element's text is never cut in two
by a comment inside it.
"""

from __future__ import annotations

from lxml import etree

from services.adapters.sepa.errors import HostileFile, MalformedFile

MAX_FILE_BYTES = 20 * 1024 * 1024
_DOCTYPES = tuple(
    "<!DOCTYPE".encode(encoding)
    for encoding in ("ascii", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be")
)
_HAS_DOCTYPE = "the file has a DOCTYPE: a bank file never needs one"


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )


def parse_bank_xml(data: bytes, *, max_bytes: int = MAX_FILE_BYTES) -> etree._Element:
    """The root element of `data`; HostileFile if it exceeds `max_bytes` or has a DOCTYPE,
    MalformedFile if it is not well-formed XML."""
    if len(data) > max_bytes:
        raise HostileFile(f"the file is {len(data)} bytes, above the cap of {max_bytes}")
    if any(doctype in data for doctype in _DOCTYPES):
        raise HostileFile(_HAS_DOCTYPE)
    try:
        # A parser per call: lxml parsers keep state and are not safe to share across threads.
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as e:
        detail = " ".join(str(e).split())  # libxml2's message may span lines; a reason does not
        raise MalformedFile(f"the file is not well-formed XML: {detail}") from None
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise HostileFile(_HAS_DOCTYPE)
    return root
