"""The rules of a SEPA credit transfer that hold before any file is written: euros only, which
accounts can be paid, how a settlement is named in the files, and which text the files may hold.

Choices a reviewer should know about:
- EndToEndId. ISO 20022 caps it at 35 characters, one short of a UUID with hyphens, so it is
  the settlement id's 32 lower-case hex digits. It travels unchanged through the bank's
  reports (pain.002, camt.054, camt.053, a return's TxDtls), and `settlement_of` turns it back
  into the settlement id; an id in any other form is not one of ours.
- IBAN. One form is stored and written: upper case, no spaces (`DE89370400440532013000`).
  `is_sepa_iban` is true only for a valid IBAN of the SEPA zone in that form, so a check
  with it (routing's, for one) also guarantees the destination kept is the stored form.
  `compact_iban` takes what a person types (lower case, the groups of four separated by
  spaces) and returns the stored form, or says why it cannot; tabs, hyphens and IBANs of
  countries outside the SEPA zone are refused. A BIC is optional: SEPA routes by IBAN alone.
- Text. The EPC's implementation guidelines allow only the basic Latin set in names and
  remittance text (`SEPA_CHARACTERS`). `sepa_text` spells a Latin letter with a diacritic as
  its base letter (the EPC conversion: é -> e, ß -> ss, Ø -> O), `&` as `+` and typographic
  quotes and dashes as their ASCII forms, and collapses whitespace. A character with no such
  spelling (Cyrillic, Greek, CJK, `@`, `_`, `;`) is refused, never dropped or replaced by a
  guess: a name the bank matches against its account holder must not be changed silently.
"""

from __future__ import annotations

import re
import string
import unicodedata
import uuid

from schwifty import BIC, IBAN
from schwifty.exceptions import SchwiftyException

SEPA_CURRENCY = "EUR"
MAX_CREDITOR_NAME = 70  # Max70Text: Nm of a debtor or creditor
MAX_REMITTANCE = 140  # Max140Text: RmtInf/Ustrd
MAX_REFERENCE = 35  # Max35Text: MsgId, PmtInfId, EndToEndId
# The largest amount of one SEPA credit transfer (EPC SCT rulebook): 999,999,999.99 EUR.
MAX_TRANSFER_AMOUNT = 99_999_999_999

SEPA_CHARACTERS = frozenset(string.ascii_letters + string.digits + "/-?:().,'+ ")
_OUR_END_TO_END_ID = re.compile("[0-9a-f]{32}")
_TYPED_IBAN = re.compile("[A-Za-z0-9 ]+")
# Letters NFKD does not decompose into a base letter and a mark, and punctuation with an
# ASCII twin in the SEPA set.
_SPELLED = str.maketrans(
    {
        "ß": "ss",
        "ẞ": "SS",
        "Æ": "AE",
        "æ": "ae",
        "Œ": "OE",
        "œ": "oe",
        "Ø": "O",
        "ø": "o",
        "Ł": "L",
        "ł": "l",
        "Đ": "D",
        "đ": "d",
        "Ð": "D",
        "ð": "d",
        "Þ": "TH",
        "þ": "th",
        "Ħ": "H",
        "ħ": "h",
        "\u0131": "i",  # dotless i
        "&": "+",
        "\u2018": "'",  # left single quotation mark
        "\u2019": "'",  # right single quotation mark, the typographic apostrophe
        "`": "'",
        "\u00b4": "'",  # acute accent
        "\u2010": "-",  # hyphen
        "\u2013": "-",  # en dash
        "\u2014": "-",  # em dash
    }
)


def end_to_end_id(settlement_id: str) -> str:
    """The EndToEndId of a settlement's transfer: its UUID's 32 lower-case hex digits;
    ValueError if `settlement_id` is not a UUID."""
    return uuid.UUID(settlement_id).hex


def settlement_of(end_to_end_id: str) -> str | None:
    """The canonical settlement id an EndToEndId of ours names; None for any other id."""
    if not _OUR_END_TO_END_ID.fullmatch(end_to_end_id):
        return None
    return str(uuid.UUID(hex=end_to_end_id))


def compact_iban(text: str) -> str:
    """The stored form (upper case, no spaces) of a valid IBAN of the SEPA zone, given compact
    or in printed groups; ValueError saying why otherwise."""
    if not _TYPED_IBAN.fullmatch(text):
        raise ValueError(f"{text!r} is not an IBAN: only letters, digits and spaces may be in one")
    try:
        iban = IBAN(text.replace(" ", ""))
    except SchwiftyException as e:
        raise ValueError(f"{text!r} is not an IBAN: {e}") from None
    if not iban.in_sepa_zone:
        raise ValueError(f"{text!r} is an IBAN of {iban.country_code}, outside the SEPA zone")
    return iban.compact


def is_sepa_iban(text: str) -> bool:
    """True for a valid IBAN (checksum, length, format) of a country in the SEPA zone, in the
    stored form: upper case, no spaces (`compact_iban` makes it from a typed one)."""
    try:
        return compact_iban(text) == text
    except ValueError:
        return False


def is_bic(text: str) -> bool:
    """True for a valid BIC of 8 or 11 upper-case characters."""
    if text != text.strip().upper():
        return False
    try:
        BIC(text)
    except SchwiftyException:
        return False
    return True


def is_sepa_reference(text: str) -> bool:
    """True for an identifier the EPC allows (MsgId, PmtInfId, EndToEndId): 1 to 35 characters
    of the SEPA set without spaces, not starting or ending with `/`, no `//`."""
    return (
        0 < len(text) <= MAX_REFERENCE
        and all(c in SEPA_CHARACTERS and c != " " for c in text)
        and not text.startswith("/")
        and not text.endswith("/")
        and "//" not in text
    )


def sepa_text(text: str) -> str:
    """`text` in the SEPA character set (see the module docstring): whitespace collapsed and
    trimmed, Latin letters without their diacritics; ValueError naming the first character
    that has no spelling in the set. Length is not checked: the XSD does that."""
    spelled = unicodedata.normalize("NFKD", " ".join(text.split()).translate(_SPELLED))
    kept = "".join(c for c in spelled if not unicodedata.combining(c))
    for c in kept:
        if c not in SEPA_CHARACTERS:
            raise ValueError(
                f"{text!r} holds {c!r} (U+{ord(c):04X}), which has no spelling in the SEPA "
                "character set"
            )
    return kept


def is_sepa_text(text: str, limit: int = MAX_CREDITOR_NAME) -> bool:
    """True if `sepa_text` takes `text` and what it makes is 1 to `limit` characters long."""
    try:
        return 0 < len(sepa_text(text)) <= limit
    except ValueError:
        return False
