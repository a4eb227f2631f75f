"""Signed commands: a command is booked only for a configured tenant, and only with its
tenant's signature over its exact bytes where signing is required."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from services.contracts.command_signature import (
    SignatureRefusal,
    signature_header,
    verify,
)
from services.domain.errors import ConfigError
from services.ledger.command_auth import CommandAuthority, command_authority, written_at
from services.platform.settings import load_settings
from tests.production_env import production as production_env

VALUE = b"\xc3\x01avro bytes of a SettlementCommand"
NOW = 1_790_000_000


def test_the_header_is_an_hmac_sha256_over_the_timestamp_a_dot_and_the_exact_value() -> None:
    header = signature_header(["csk_acme"], VALUE, NOW)
    digest = hmac.new(b"csk_acme", f"{NOW}.".encode() + VALUE, hashlib.sha256).hexdigest()
    assert header == f"t={NOW},v1={digest}".encode()
    assert verify(header, VALUE, ["csk_acme"], NOW) is None


def test_a_signature_under_another_secret_or_of_other_bytes_is_invalid() -> None:
    header = signature_header(["csk_other"], VALUE, NOW)
    assert verify(header, VALUE, ["csk_acme"], NOW) is SignatureRefusal.INVALID
    good = signature_header(["csk_acme"], VALUE, NOW)
    assert verify(good, VALUE + b" ", ["csk_acme"], NOW) is SignatureRefusal.INVALID
    # The timestamp is signed too: moving it forward breaks the signature.
    moved = good.replace(str(NOW).encode(), str(NOW + 1).encode())
    assert verify(moved, VALUE, ["csk_acme"], NOW) is SignatureRefusal.INVALID
    assert verify(good, VALUE, [], NOW) is SignatureRefusal.INVALID  # a tenant with no secret


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"garbage",
        b"t=1",
        b"v1=abc",
        b"t=abc,v1=00",
        b"\xff\xfe",
        b"t=" + b"9" * 5000 + b",v1=0",
    ],
)
def test_a_header_that_does_not_read_is_invalid(header: bytes) -> None:
    assert verify(header, VALUE, ["csk_acme"], NOW) is SignatureRefusal.INVALID


def test_a_good_signature_outside_the_tolerance_has_expired_either_way() -> None:
    old = signature_header(["csk_acme"], VALUE, NOW - 301)
    ahead = signature_header(["csk_acme"], VALUE, NOW + 301)
    edge = signature_header(["csk_acme"], VALUE, NOW - 300)
    assert verify(old, VALUE, ["csk_acme"], NOW) is SignatureRefusal.EXPIRED
    assert verify(ahead, VALUE, ["csk_acme"], NOW) is SignatureRefusal.EXPIRED
    assert verify(edge, VALUE, ["csk_acme"], NOW) is None
    assert verify(None, VALUE, ["csk_acme"], NOW) is SignatureRefusal.MISSING


def test_during_a_rotation_either_secret_signs() -> None:
    new = signature_header(["csk_new"], VALUE, NOW)
    both = signature_header(["csk_old", "csk_new"], VALUE, NOW)
    assert verify(new, VALUE, ["csk_new", "csk_old"], NOW) is None
    assert verify(both, VALUE, ["csk_new"], NOW) is None


def authority(required: bool) -> CommandAuthority:
    secrets = {"acme": ("csk_acme",), "globex": ("csk_globex",)}
    return CommandAuthority(frozenset({"acme", "globex"}), secrets, signing_required=required)


@pytest.mark.parametrize("required", [True, False])
def test_a_command_for_a_tenant_settle_does_not_know_is_refused_in_every_mode(
    required: bool,
) -> None:
    signed = signature_header(["csk_acme"], VALUE, NOW)
    for tenant in ("initech", None, 7, ""):
        refusal = authority(required).refusal(tenant, VALUE, signed, NOW)
        assert refusal is not None and refusal.code == "unknown_tenant"


def test_required_signing_refuses_unsigned_forged_and_other_tenants_signatures() -> None:
    required = authority(True)
    acme = signature_header(["csk_acme"], VALUE, NOW)
    assert required.refusal("acme", VALUE, acme, NOW) is None
    assert getattr(required.refusal("acme", VALUE, None, NOW), "code", None) == "signature_missing"
    # globex signing a command for acme proves nothing about acme.
    assert getattr(required.refusal("globex", VALUE, acme, NOW), "code", None) == (
        "signature_invalid"
    )
    stale = signature_header(["csk_acme"], VALUE, NOW - 3600)
    assert getattr(required.refusal("acme", VALUE, stale, NOW), "code", None) == (
        "signature_expired"
    )


def test_optional_signing_accepts_unsigned_but_still_refuses_a_bad_signature() -> None:
    optional = authority(False)
    assert optional.refusal("acme", VALUE, None, NOW) is None
    forged = signature_header(["guess"], VALUE, NOW)
    assert getattr(optional.refusal("acme", VALUE, forged, NOW), "code", None) == (
        "signature_invalid"
    )


def test_signing_is_required_in_production_and_optional_locally_by_default() -> None:
    assert not load_settings({}).command_signing_required
    production = production_env(SETTLE_COMMAND_SIGNING_SECRETS=f"acme:{'s' * 32}")
    assert load_settings(production).command_signing_required
    with pytest.raises(ConfigError, match=r"^SETTLE_COMMAND_SIGNING: is optional"):
        load_settings({**production, "SETTLE_COMMAND_SIGNING": "optional"})
    assert load_settings({"SETTLE_COMMAND_SIGNING": "required"}).command_signing_required
    assert not load_settings({"SETTLE_COMMAND_SIGNING": "optional"}).command_signing_required


def test_signing_secrets_are_tenant_secret_pairs_several_per_tenant_and_never_shown() -> None:
    settings = load_settings(
        {
            "SETTLE_API_TOKENS": "acme:tok-a,globex:tok-g",
            "SETTLE_COMMAND_SIGNING_SECRETS": "acme:csk_new, acme:csk_old,globex:csk_g",
        }
    )
    assert "csk_new" not in repr(settings)
    auth = command_authority(settings)
    assert auth.secrets == {"acme": ("csk_new", "csk_old"), "globex": ("csk_g",)}
    assert "csk_new" not in repr(auth)
    assert auth.tenants == {"acme", "globex"}
    assert command_authority(load_settings({})).unsigned_tenants() == ["acme"]


@pytest.mark.parametrize("value", ["acme", "acme:", ":csk", "acme:csk,globex"])
def test_a_malformed_signing_secret_list_names_its_variable(value: str) -> None:
    with pytest.raises(ConfigError, match="SETTLE_COMMAND_SIGNING_SECRETS"):
        load_settings({"SETTLE_COMMAND_SIGNING_SECRETS": value})


def test_one_signing_secret_for_two_tenants_is_refused_without_showing_it() -> None:
    # Either tenant could then sign the other's commands.
    with pytest.raises(ConfigError, match="SETTLE_COMMAND_SIGNING_SECRETS") as refused:
        load_settings({"SETTLE_COMMAND_SIGNING_SECRETS": "acme:csk_shared,globex:csk_shared"})
    assert "csk_shared" not in str(refused.value)


def test_the_worked_example_in_the_schemas_readme_holds() -> None:
    # schemas/README.md gives producers outside settle this vector to test their signer with.
    header = signature_header(["csk_example"], b"\xc3\x01example", 1_790_000_000)
    assert header == (
        b"t=1790000000,v1=81e74c4947d627df3a1e6d0e84181738fab2cf17fd79e68fdbe2303ac3a45c8e"
    )


def test_a_signature_is_judged_at_the_brokers_append_time_when_the_broker_stamped_it() -> None:
    assert written_at(1_790_000_000_999, 1, now=NOW + 3600) == 1_790_000_000
    # A producer's own timestamp (CreateTime, type 0) proves nothing: the clock decides.
    assert written_at(1_790_000_000_999, 0, now=NOW + 3600) == NOW + 3600
    assert written_at(-1, None, now=NOW) == NOW
