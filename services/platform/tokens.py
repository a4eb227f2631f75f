"""Bearer tokens as configured: `name:token` pairs, several per name while one is rotated."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import SecretStr


def parse_tokens(value: str, noun: str = "token") -> dict[str, tuple[str, ...]]:
    """Each name's values from `name:value,...` (tokens, or signing secrets: `noun` names
    them in errors), in the order given; blank pairs are skipped. ValueError naming the name
    (never the value) when a pair is malformed or a value is given twice."""
    held: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for pair in value.split(","):
        if not pair.strip():
            continue
        name, sep, secret = pair.strip().partition(":")
        if not sep or not name or not secret:
            raise ValueError(f"must be tenant:{noun} pairs separated by commas")
        if secret in owner:
            # A value names one tenant: the same one for two would let either act as the other.
            raise ValueError(f"a {noun} of tenant {name!r} is given twice")
        owner[secret] = name
        held[name] = (*held.get(name, ()), secret)
    return held


def by_token(tokens: Mapping[str, tuple[SecretStr, ...]]) -> dict[str, str]:
    """Token to the name it belongs to, every token of every name included."""
    return {token.get_secret_value(): name for name, held in tokens.items() for token in held}


def parse_signing_secrets(value: object) -> object:
    """`tenant:secret,tenant:secret,...` as {tenant: (secret, ...)}; several secrets of one
    tenant are all accepted (a rotation). Other values are passed on to validation."""
    if not isinstance(value, str):
        return value
    held = parse_tokens(value, noun="secret")
    return {tenant: tuple(SecretStr(s) for s in secrets) for tenant, secrets in held.items()}
