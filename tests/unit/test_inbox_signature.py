"""The inbox's Stripe-Signature check accepts exactly what the stripe package's own
`WebhookSignature.verify_header` accepts, and says why it refuses."""

from __future__ import annotations

import time

import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

from railsim.webhooks import signature_header
from services.inbox.errors import BadSignature
from services.inbox.signature import SignatureCheck

SECRET = "whsec_unit"
OTHER = "whsec_other"
NOW = 1_790_000_000
BODY = b'{"id":"evt_1","type":"transfer.created","data":{"object":{"id":"tr_1"}}}'


def library_accepts(body: bytes, header: str, secret: str, tolerance: int) -> bool:
    try:
        stripe.WebhookSignature.verify_header(body.decode(), header, secret, tolerance)
    except stripe.SignatureVerificationError:
        return False
    return True


def ours_accepts(body: bytes, header: str, secret: str, tolerance: int) -> bool:
    try:
        SignatureCheck([secret], tolerance).verify(body, header)
    except BadSignature:
        return False
    return True


def v1(body: bytes, secret: str, at: int) -> str:
    return signature_header(body, secret, at).split(",")[1]


# Headers built from well-formed and broken items: valid and foreign signatures, old, future
# and unreadable timestamps, items without values, unknown schemes, in any order.
ITEMS = st.sampled_from(
    [
        f"t={NOW}",
        f"t={NOW - 400}",
        f"t={NOW + 50}",
        "t=",
        "t",
        "t=abc",
        "t=1=2",
        v1(BODY, SECRET, NOW),
        v1(BODY, SECRET, NOW - 400),
        v1(BODY, SECRET, NOW + 50),
        v1(BODY, OTHER, NOW),
        "v1=deadbeef",
        "v1=",
        "v1",
        "v0=abc",
        "x=1",
        "",
        v1(BODY, SECRET, NOW) + "=tail",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=4))
def test_accepts_exactly_what_the_stripe_library_accepts(items: list[str]) -> None:
    header = ",".join(items)
    real_time = time.time
    # Both read the clock: pin it for the library too, so "within tolerance" is the same.
    time.time = lambda: float(NOW)  # type: ignore[assignment]
    try:
        expected = library_accepts(BODY, header, SECRET, 300)
    finally:
        time.time = real_time  # type: ignore[assignment]
    check = SignatureCheck([SECRET], 300, clock=lambda: float(NOW))
    try:
        check.verify(BODY, header)
        ours = True
    except BadSignature:
        ours = False
    assert ours == expected, header


@pytest.mark.parametrize(
    ("header", "code"),
    [
        (None, "missing_signature"),
        ("", "missing_signature"),
        (signature_header(BODY, OTHER, NOW), "invalid_signature"),
        (signature_header(BODY, SECRET, NOW - 301), "stale_signature"),
        (signature_header(BODY, OTHER, NOW - 301), "invalid_signature"),  # not ours, not stale
        (f"t={NOW},v1=\u00e9\u00e9", "invalid_signature"),  # Latin-1 text, not a server error
    ],
)
def test_refusals_name_their_reason(header: str | None, code: str) -> None:
    check = SignatureCheck([SECRET], 300, clock=lambda: float(NOW))
    with pytest.raises(BadSignature) as refused:
        check.verify(BODY, header)
    assert refused.value.code == code


def test_during_a_rotation_either_secret_signs() -> None:
    check = SignatureCheck([OTHER, SECRET], 300, clock=lambda: float(NOW))
    check.verify(BODY, signature_header(BODY, SECRET, NOW))
    check.verify(BODY, signature_header(BODY, OTHER, NOW))
    assert not ours_accepts(BODY, signature_header(BODY, "whsec_retired", NOW), SECRET, 300)


def test_a_body_that_is_not_utf8_is_refused() -> None:
    body = b"\xff\xfe"
    with pytest.raises(BadSignature, match="not UTF-8"):
        SignatureCheck([SECRET]).verify(body, signature_header(body, SECRET, int(time.time())))
