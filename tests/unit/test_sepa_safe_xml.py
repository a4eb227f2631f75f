"""XML from a bank is read without letting it attack the reader: entity bombs, external
entities and DOCTYPEs are refused unread, as are files above the cap and files that are not
XML, each with a reason fit to store."""

from __future__ import annotations

import pytest

from services.adapters.sepa.errors import HostileFile, MalformedFile, SepaFileError
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.domain.errors import SettleError

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
  <!ENTITY lol "lol">
  <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
  <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
  <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
  <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
  <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
  <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<Document><MsgId>&lol9;</MsgId></Document>"""

EXTERNAL_ENTITY = b"""<?xml version="1.0"?>
<!DOCTYPE Document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<Document><MsgId>&xxe;</MsgId></Document>"""

EXTERNAL_DTD = b"""<?xml version="1.0"?>
<!DOCTYPE Document SYSTEM "http://127.0.0.1:9/evil.dtd">
<Document><MsgId>M</MsgId></Document>"""

PLAIN = b'<?xml version="1.0" encoding="UTF-8"?>\n<Document><MsgId>M-1</MsgId></Document>'


def refused(kind: type[SepaFileError], data: bytes, **cap: int) -> str:
    with pytest.raises(kind) as raised:
        parse_bank_xml(data, **cap)
    assert isinstance(raised.value, SettleError) and not raised.value.retriable
    return raised.value.reason


def test_a_plain_file_is_read() -> None:
    root = parse_bank_xml(PLAIN)
    assert root.findtext("MsgId") == "M-1"


def test_billion_laughs_is_refused_without_expanding_it() -> None:
    assert "DOCTYPE" in refused(HostileFile, BILLION_LAUGHS)


def test_an_external_entity_is_refused_and_never_read() -> None:
    assert "DOCTYPE" in refused(HostileFile, EXTERNAL_ENTITY)
    assert "DOCTYPE" in refused(HostileFile, EXTERNAL_ENTITY.decode().encode("utf-16"))


def test_any_doctype_is_refused() -> None:
    assert "DOCTYPE" in refused(HostileFile, EXTERNAL_DTD)
    assert "DOCTYPE" in refused(HostileFile, b"<!DOCTYPE Document><Document/>")


def test_a_file_above_the_cap_is_refused_before_it_is_parsed() -> None:
    reason = refused(HostileFile, PLAIN, max_bytes=len(PLAIN) - 1)
    assert f"{len(PLAIN)} bytes" in reason and f"cap of {len(PLAIN) - 1}" in reason
    assert parse_bank_xml(PLAIN, max_bytes=len(PLAIN)) is not None


@pytest.mark.parametrize(
    "broken",
    [b"", b"<Document>", b"<Document></Doc>", b"not xml at all", b"<a>&undeclared;</a>"],
)
def test_a_file_that_is_not_well_formed_is_refused(broken: bytes) -> None:
    assert "not well-formed" in refused(MalformedFile, broken)


def test_nesting_beyond_libxml2s_limit_is_refused() -> None:
    deep = b"<a>" * 5000 + b"</a>" * 5000
    refused(MalformedFile, deep)


def test_a_comment_does_not_cut_a_value_in_two() -> None:
    root = parse_bank_xml(b"<Document><MsgId>M-<!-- note -->1</MsgId></Document>")
    assert root.findtext("MsgId") == "M-1"
