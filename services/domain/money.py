"""Money as settle holds it: an int of minor units beside an ISO 4217 currency code.

`CURRENCIES` is ISO 4217 list one as of 2026: the codes of currencies in circulation. Left out,
because nobody is paid out in them: funds codes (BOV CHE CHW CLF COU MXV USN UYI UYW), precious
metals (XAG XAU XPD XPT), supranational units (XBA XBB XBC XBD XDR XSU XUA), the testing and
"no currency" codes (XTS XXX), and currencies withdrawn or demonetised (HRK 2023, SLL, CUC,
ZWL 2024, ANG 2025, BGN 2026). A new code is a one-line change here.
"""

from __future__ import annotations

# The largest amount PostgreSQL's bigint and Avro's long both hold.
MAX_AMOUNT = 2**63 - 1

# The largest amount one settlement may have: 10**15 minor units (ten trillion of a two-decimal
# currency; Stripe itself refuses more than 99,999,999,999). Why so far below MAX_AMOUNT: an
# account's balance is kept in bigint shard rows (`domain.balance_shards`), and a shard holds
# the sum of the postings that landed on it, each at most one settlement's amount. Two amounts
# near 2**62 overflowed a shard in one step, possibly on a posting made after the rail paid
# (payable -> paid_out). Now one posting moves a shard by at most 10**15, so overflowing one
# takes more than MAX_AMOUNT // MAX_SETTLEMENT_AMOUNT = 9,223 maximum-amount postings piled on
# that one shard in one direction, i.e. more than 9.2 * 10**18 minor units through one
# tenant's account in one currency (92 quadrillion of a two-decimal currency): no step a
# settlement takes, accepted or after the rail acted, can overflow a shard before then.
MAX_SETTLEMENT_AMOUNT = 10**15

_ISO_4217_LIST_ONE = """
    AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BHD BIF BMD
    BND BOB BRL BSD BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC
    CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL
    GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR
    ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP
    LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK
    MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR
    PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE
    SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD
    TZS UAH UGX USD UYU UZS VED VES VND VUV WST XAF XCD XCG XOF
    XPF YER ZAR ZMW ZWG
"""

CURRENCIES: frozenset[str] = frozenset(_ISO_4217_LIST_ONE.split())
# The currencies whose major unit has other than two decimals in Stripe's amounts and reports.
ZERO_DECIMAL = frozenset(
    [
        "BIF",
        "CLP",
        "DJF",
        "GNF",
        "JPY",
        "KMF",
        "KRW",
        "MGA",
        "PYG",
        "RWF",
        "UGX",
        "VND",
        "VUV",
        "XAF",
        "XOF",
        "XPF",
    ]
)
THREE_DECIMAL = frozenset(["BHD", "JOD", "KWD", "OMR", "TND"])


def is_currency(code: str) -> bool:
    """True if `code` is an active ISO 4217 currency code, exactly as written (upper case)."""
    return code in CURRENCIES


def is_amount(value: object) -> bool:
    """True if `value` is an int (not a bool) of minor units in 1 .. MAX_AMOUNT."""
    return type(value) is int and 0 < value <= MAX_AMOUNT


def exponent(currency: str) -> int:
    """How many decimals `currency`'s major unit has as Stripe writes it: 0 (JPY...), 3 (KWD...)
    or 2; an amount of n minor units is n / 10**exponent major units."""
    if currency in ZERO_DECIMAL:
        return 0
    return 3 if currency in THREE_DECIMAL else 2


def major_text(amount: int, currency: str) -> str:
    """`amount` minor units written in major units with the currency's decimals, digits
    grouped, and the code: 123456 EUR is "1,234.56 EUR" (integers only, never a float)."""
    places = exponent(currency)
    whole, fraction = divmod(abs(amount), 10**places)
    sign = "-" if amount < 0 else ""
    decimals = f".{fraction:0{places}d}" if places else ""
    return f"{sign}{whole:,}{decimals} {currency}"
