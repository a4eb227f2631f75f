"""Settlement intake: every refusal names its code and field; equal requests share a fingerprint."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.domain.money import CURRENCIES, MAX_SETTLEMENT_AMOUNT
from services.ledger.errors import InvalidRequest
from services.ledger.intake import (
    MAX_BODY_BYTES,
    METHOD,
    PATH,
    body_fields,
    canonical_body,
    fingerprint,
    parse_settlement_body,
    parse_settlement_command,
    validate_idempotency_key,
)
from services.ledger.model import SettlementRequest
from services.ledger.responses import canonical_json

BODY: dict[str, Any] = {
    "reference": "inv-2026-0042",
    "payee": "Ada Lovelace",
    "destination": "acct_1Nv0FGQ9RKHgCVdK",
    "amount": 1050,
    "currency": "EUR",
}


def parse(
    body: dict[str, Any] | bytes, tenant: str = "acme", key: str = "key-1"
) -> SettlementRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_settlement_body(tenant, key, raw)


def refusal(body: dict[str, Any] | bytes, tenant: str = "acme") -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse(body, tenant)
    return caught.value


def with_amount(literal: str) -> bytes:
    return (
        json.dumps({**BODY, "amount": 0})
        .encode()
        .replace(b'"amount": 0', f'"amount": {literal}'.encode())
    )


def command(**changes: Any) -> dict[str, Any]:
    record = {"tenant": "acme", "idempotency_key": "key-1", **BODY, "rail": None, "metadata": {}}
    return {**record, **changes}


def test_a_valid_body_becomes_a_request_with_a_fingerprint() -> None:
    body = {**BODY, "rail": "stripe", "metadata": {"order": "42", "batch": "b7"}}
    request = parse(body)
    assert (request.tenant, request.idempotency_key) == ("acme", "key-1")
    assert (request.reference, request.payee, request.destination) == (
        "inv-2026-0042",
        "Ada Lovelace",
        "acct_1Nv0FGQ9RKHgCVdK",
    )
    assert (request.amount, request.currency, request.rail) == (1050, "EUR", "stripe")
    assert list(request.metadata.items()) == [("batch", "b7"), ("order", "42")]
    assert len(request.fingerprint) == 32


def test_the_fingerprint_is_sha256_of_the_documented_canonical_document() -> None:
    # Stored fingerprints outlive deploys: changing this form would turn retries into 422s.
    request = parse({**BODY, "payee": "Zoë", "metadata": {"k": "v"}})
    document = (
        '{"body":{"amount":1050,"currency":"EUR","destination":"acct_1Nv0FGQ9RKHgCVdK",'
        '"metadata":{"k":"v"},"payee":"Zoë","reference":"inv-2026-0042"},'
        '"method":"POST","path":"/v1/settlements","tenant":"acme"}'
    )
    assert request.fingerprint == hashlib.sha256(document.encode()).digest()
    assert (
        canonical_body(request)
        == (
            '{"amount":1050,"currency":"EUR","destination":"acct_1Nv0FGQ9RKHgCVdK",'
            '"metadata":{"k":"v"},"payee":"Zoë","reference":"inv-2026-0042"}'
        ).encode()
    )


@pytest.mark.parametrize("literal", ["100", "100.0", "1e2", "1E+2", "100.000", "0.1e3"])
def test_integral_spellings_of_one_amount_are_the_same_request(literal: str) -> None:
    request = parse(with_amount(literal))
    assert request.amount == 100 and type(request.amount) is int
    assert request.fingerprint == parse(with_amount("100")).fingerprint


def test_the_largest_amount_is_accepted_and_one_more_is_refused() -> None:
    assert parse(with_amount("1000000000000000")).amount == MAX_SETTLEMENT_AMOUNT == 10**15
    assert parse(with_amount("1e15")).amount == 10**15
    for over in ("1000000000000001", "1.000000000000001e15", str(2**62)):
        error = refusal(with_amount(over))
        assert (error.code, error.field, error.status) == ("invalid_amount", "amount", 400)
        assert "1000000000000000" in error.message


@pytest.mark.parametrize(
    "literal",
    [
        "100.5",
        "0.001",
        "0",
        "-0.0",
        "-100",
        str(2**63),
        "1e19",
        "1e999999999",
        "1e-999999999",
        '"100"',
        "true",
        "false",
        "null",
        "NaN",
        "Infinity",
        "-Infinity",
        "[100]",
        '{"v":100}',
    ],
)
def test_amounts_that_are_not_whole_positive_minor_units_are_refused(literal: str) -> None:
    error = refusal(with_amount(literal))
    assert (error.code, error.field, error.status) == ("invalid_amount", "amount", 400)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=500)
@given(_JSON)
def test_canonical_json_is_byte_for_byte_the_form_stored_fingerprints_were_made_with(
    value: object,
) -> None:
    # Fingerprints stored by earlier releases hashed this exact json.dumps form; any other
    # byte (an escape, a key order) would turn their retries into 422s.
    stored_form = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == stored_form.encode()


def test_key_order_and_whitespace_do_not_change_the_fingerprint() -> None:
    compact = json.dumps(BODY, separators=(",", ":")).encode()
    spaced = json.dumps(dict(reversed(list(BODY.items()))), indent=4).encode()
    assert parse(compact).fingerprint == parse(spaced).fingerprint


def test_null_rail_and_empty_metadata_are_the_same_as_leaving_them_out() -> None:
    assert canonical_body(parse({**BODY, "rail": None, "metadata": {}})) == (
        b'{"amount":1050,"currency":"EUR","destination":"acct_1Nv0FGQ9RKHgCVdK",'
        b'"payee":"Ada Lovelace","reference":"inv-2026-0042"}'
    )
    plain = parse(BODY).fingerprint
    assert parse({**BODY, "rail": None}).fingerprint == plain
    assert parse({**BODY, "metadata": {}}).fingerprint == plain


@pytest.mark.parametrize(
    "change",
    [
        {"amount": 1051},
        {"currency": "USD"},
        {"reference": "inv-2"},
        {"payee": "Ada"},
        {"destination": "acct_2"},
        {"rail": "sim"},
        {"metadata": {"k": "v"}},
    ],
)
def test_any_difference_in_the_body_changes_the_fingerprint(change: dict[str, Any]) -> None:
    assert parse({**BODY, **change}).fingerprint != parse(BODY).fingerprint


def test_tenant_method_and_path_are_part_of_the_fingerprint() -> None:
    request = parse(BODY)
    body = body_fields(request)
    assert fingerprint("acme", METHOD, PATH, body) == request.fingerprint
    assert parse(BODY, tenant="globex").fingerprint != request.fingerprint
    assert fingerprint("acme", METHOD, "/v1/other", body) != request.fingerprint
    assert fingerprint("acme", "PUT", PATH, body) != request.fingerprint


def test_the_idempotency_key_is_not_part_of_the_fingerprint() -> None:
    assert parse(BODY, key="a").fingerprint == parse(BODY, key="b").fingerprint


@pytest.mark.parametrize("field", ["reference", "payee", "destination", "amount", "currency"])
def test_each_required_field_is_named_when_missing(field: str) -> None:
    error = refusal({k: v for k, v in BODY.items() if k != field})
    assert (error.code, error.field) == ("missing_field", field)


@pytest.mark.parametrize("field", ["referense", "tenant", "idempotency_key", "Amount"])
def test_unknown_fields_are_refused_not_dropped(field: str) -> None:
    error = refusal({**BODY, field: "x"})
    assert (error.code, error.field) == ("unknown_field", field)


@pytest.mark.parametrize("field", ["reference", "payee", "destination"])
@pytest.mark.parametrize(
    "value", ["", "x" * 256, "a\nb", "a\x00b", "a\x7fb", "a\x85b", "\ud800", 7, None, ["a"]]
)
def test_text_fields_must_be_1_to_255_characters_without_controls(field: str, value: Any) -> None:
    error = refusal({**BODY, field: value})
    assert (error.code, error.field) == ("invalid_field", field)


@pytest.mark.parametrize("field", ["reference", "payee", "destination"])
def test_text_fields_keep_255_characters_and_non_ascii(field: str) -> None:
    assert getattr(parse({**BODY, field: "é" * 255}), field) == "é" * 255


@pytest.mark.parametrize(
    "value", ["usd", "Usd", "US", "USDX", "XAU", "XTS", "XXX", "HRK", "ZZZ", 840, None]
)
def test_currency_must_be_an_active_upper_case_iso_4217_code(value: Any) -> None:
    error = refusal({**BODY, "currency": value})
    assert (error.code, error.field) == ("invalid_currency", "currency")


def test_the_common_currencies_are_known() -> None:
    assert {"USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "XOF", "XCG", "ZWG"} <= CURRENCIES
    assert parse({**BODY, "currency": "JPY"}).currency == "JPY"


@pytest.mark.parametrize("value", ["paypal", "Stripe", "", 1, True])
def test_rail_must_be_null_or_a_rail_settle_drives(value: Any) -> None:
    error = refusal({**BODY, "rail": value})
    assert (error.code, error.field) == ("invalid_field", "rail")


def metadata_refusal(metadata: Any) -> tuple[str, str | None]:
    error = refusal({**BODY, "metadata": metadata})
    return error.code, error.field


@pytest.mark.parametrize("metadata", [None, [], "k=v", 1, {str(i): "v" for i in range(51)}])
def test_metadata_must_be_a_map_of_at_most_50_pairs(metadata: Any) -> None:
    assert metadata_refusal(metadata) == ("invalid_metadata", "metadata")


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"k" * 41: "v"}, "metadata." + "k" * 41),
        ({"": "v"}, "metadata."),
        ({"a[0]": "v"}, "metadata.a[0]"),
        ({"a\tb": "v"}, "metadata.a\tb"),
        ({"k": "v" * 501}, "metadata.k"),
        ({"k": 1}, "metadata.k"),
        ({"k": None}, "metadata.k"),
        ({"k": {"n": "v"}}, "metadata.k"),
        ({"k": "a\x00"}, "metadata.k"),
        ({"z": 1, "a": 2}, "metadata.a"),
    ],
)
def test_metadata_pairs_outside_stripes_limits_name_their_key(metadata: Any, field: str) -> None:
    assert metadata_refusal(metadata) == ("invalid_metadata", field)


def test_metadata_at_the_limits_is_accepted() -> None:
    many = {f"{i:02d}".ljust(40, "k"): "v" for i in range(50)}
    assert parse({**BODY, "metadata": many}).metadata == many
    assert parse({**BODY, "metadata": {"k": "v" * 500, "e": ""}}).metadata["k"] == "v" * 500


def padded(size: int) -> bytes:
    raw = json.dumps(BODY).encode()
    return raw[:-1] + b" " * (size - len(raw)) + b"}"


def test_a_body_of_16_kib_is_read_and_one_byte_more_is_413() -> None:
    assert parse(padded(MAX_BODY_BYTES)).amount == 1050
    error = refusal(padded(MAX_BODY_BYTES + 1))
    assert (error.code, error.status) == ("body_too_large", 413)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xff\xfe{}",
        b"\xef\xbb\xbf{}",
        "{}".encode("utf-16"),
        b"[]",
        b'"s"',
        b"1",
        b"null",
        b"{} {}",
        b'{"amount": 1, "amount": 1}',
        b'{"metadata": {"k": "a", "k": "b"}}',
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_bodies_that_are_not_one_utf8_json_object_without_duplicate_keys_are_malformed(
    raw: bytes,
) -> None:
    error = refusal(raw)
    assert (error.code, error.status) == ("malformed_json", 400)


def test_a_missing_idempotency_key_is_named() -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_idempotency_key(None)
    assert (caught.value.code, caught.value.field) == ("missing_idempotency_key", "Idempotency-Key")


@pytest.mark.parametrize("key", ["", " ", " lead", "trail ", "tab\tkey", "é", "k" * 256, "a\x7f"])
def test_idempotency_keys_must_be_1_to_255_printable_ascii_characters(key: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_idempotency_key(key)
    assert (caught.value.code, caught.value.field) == ("invalid_idempotency_key", "Idempotency-Key")
    with pytest.raises(InvalidRequest):
        parse(BODY, key=key)


@pytest.mark.parametrize("key", ["k", "k" * 255, "order 42/retry~1", "!", "9f1c-ab"])
def test_printable_ascii_keys_are_kept_as_sent(key: str) -> None:
    assert validate_idempotency_key(key) == key


def test_a_kafka_command_and_the_same_http_request_share_a_fingerprint() -> None:
    body = {**BODY, "amount": 1050.0, "rail": "stripe", "metadata": {"b": "2", "a": "1"}}
    over_http = parse(body)
    over_kafka = parse_settlement_command(command(rail="stripe", metadata={"a": "1", "b": "2"}))
    assert over_kafka == over_http


def test_a_command_with_defaults_matches_a_body_without_optional_fields() -> None:
    assert parse_settlement_command(command()).fingerprint == parse(BODY).fingerprint


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"amount": 0}, "invalid_amount", "amount"),
        ({"amount": True}, "invalid_amount", "amount"),
        ({"amount": -5}, "invalid_amount", "amount"),
        ({"currency": "eur"}, "invalid_currency", "currency"),
        ({"tenant": ""}, "invalid_field", "tenant"),
        ({"tenant": "a:b"}, "invalid_field", "tenant"),
        ({"tenant": "t" * 65}, "invalid_field", "tenant"),
        ({"payee": ""}, "invalid_field", "payee"),
        ({"idempotency_key": ""}, "invalid_idempotency_key", "idempotency_key"),
        ({"idempotency_key": None}, "missing_idempotency_key", "idempotency_key"),
        ({"metadata": {"k": "v" * 501}}, "invalid_metadata", "metadata.k"),
        ({"priority": "high"}, "unknown_field", "priority"),
    ],
)
def test_invalid_commands_are_refused_like_http_requests(
    changes: dict[str, Any], code: str, field: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_settlement_command(command(**changes))
    assert (caught.value.code, caught.value.field) == (code, field)


@pytest.mark.parametrize("field", ["tenant", "reference", "amount"])
def test_commands_missing_a_required_field_are_refused(field: str) -> None:
    record = {k: v for k, v in command().items() if k != field}
    with pytest.raises(InvalidRequest) as caught:
        parse_settlement_command(record)
    assert (caught.value.code, caught.value.field) == ("missing_field", field)


def test_a_command_larger_than_any_http_body_is_refused() -> None:
    metadata = {f"{i:02d}".ljust(40, "k"): "v" * 500 for i in range(50)}
    with pytest.raises(InvalidRequest) as caught:
        parse_settlement_command(command(metadata=metadata))
    assert caught.value.code == "body_too_large"


texts = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=30)
bodies = st.fixed_dictionaries(
    {
        "reference": texts,
        "payee": texts,
        "destination": texts,
        "amount": st.integers(1, MAX_SETTLEMENT_AMOUNT),
        "currency": st.sampled_from(sorted(CURRENCIES)),
    },
    optional={
        "rail": st.sampled_from([None, "sim", "stripe"]),
        "metadata": st.dictionaries(st.text("abcxyz_", min_size=1, max_size=8), texts, max_size=5),
    },
)


@settings(max_examples=200)
@given(body=bodies, data=st.data())
def test_every_spelling_of_a_body_and_its_command_share_one_fingerprint(
    body: dict[str, Any], data: st.DataObject
) -> None:
    order = data.draw(st.permutations(list(body)))
    indent = data.draw(st.sampled_from([None, 0, 2]))
    ascii_only = data.draw(st.booleans())
    raw = json.dumps({k: body[k] for k in order}, indent=indent, ensure_ascii=ascii_only)
    over_http = parse(raw.encode())
    over_kafka = parse_settlement_command({"tenant": "acme", "idempotency_key": "key-1", **body})
    assert over_http.fingerprint == over_kafka.fingerprint == parse(body).fingerprint
    assert over_http == over_kafka
