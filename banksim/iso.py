"""What every ISO 20022 message the bank reads or writes shares: namespaces, child elements,
amounts as decimal text, timestamps, and the serialised form."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal, InvalidOperation

from lxml import etree

PAIN001 = "urn:iso:std:iso:20022:tech:xsd:pain.001.001.09"
PAIN002 = "urn:iso:std:iso:20022:tech:xsd:pain.002.001.10"
CAMT053 = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"
CAMT054 = "urn:iso:std:iso:20022:tech:xsd:camt.054.001.08"
CENTS = 100  # every amount the bank books is in euro, two decimals


def document(namespace: str) -> etree._Element:
    """An empty `Document` of the message whose namespace is `namespace`."""
    return etree.Element(f"{{{namespace}}}Document", nsmap={None: namespace})


def sub(parent: etree._Element, path: str, text: str | None = None) -> etree._Element:
    """Append the chain of elements `path` ("Bal/Tp/CdOrPrtry/Cd") under `parent`, in its
    namespace; the last gets `text`. Returns the last."""
    # "{namespace}" cut from the parent's tag: cheaper than a QName, and this is the hot path
    tag = str(parent.tag)
    prefix = tag[: tag.index("}") + 1]
    node = parent
    for name in path.split("/"):
        node = etree.SubElement(node, prefix + name)
    if text is not None:
        node.text = text
    return node


def amount(parent: etree._Element, tag: str, minor: int, currency: str = "EUR") -> None:
    """`<tag Ccy="EUR">12.34</tag>` under `parent`, from cents."""
    sub(parent, tag, decimal_text(minor)).set("Ccy", currency)


def decimal_text(minor: int) -> str:
    """Cents as ISO's decimal text: 1234 -> "12.34"."""
    whole, cents = divmod(abs(minor), CENTS)
    return f"{'-' if minor < 0 else ''}{whole}.{cents:02d}"


def minor_units(text: str) -> int | None:
    """ISO decimal text as cents: "12.3" -> 1230; None for anything finer than a cent."""
    try:
        value = Decimal(text.strip()) * CENTS
    except InvalidOperation:
        return None
    return int(value) if value == value.to_integral_value() else None


def timestamp(at: datetime) -> str:
    """An aware datetime as ISODateTime, to the second, with its offset."""
    return at.replace(microsecond=0).isoformat()


def day_text(day: date) -> str:
    """A date as ISODate."""
    return day.isoformat()


def serialised(root: etree._Element) -> bytes:
    """The message as the bank sends it: UTF-8, declared, indented."""
    etree.indent(root)
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8")


def text_of(node: etree._Element, path: str, namespace: str) -> str | None:
    """The stripped text of the element at `path` below `node` (names without prefixes),
    or None if there is none."""
    found = node.find("/".join(f"{{{namespace}}}{tag}" for tag in path.split("/")))
    if found is None or found.text is None:
        return None
    return found.text.strip()
