"""Bearer tokens as configured: `name:token` pairs, several per name while one is rotated."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import SecretStr


def parse_tokens(value: str) -> dict[str, tuple[str, ...]]:
    """Each name's tokens from `name:token,...`, in the order given; ValueError naming the
    tenant (never the token) when a pair is malformed or a token is given twice."""
    tokens: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for pair in value.split(","):
        name, sep, token = pair.strip().partition(":")
        if not sep or not name or not token:
            raise ValueError("must be tenant:token pairs separated by commas")
        if token in owner:
            # A token names one tenant: the same one for two would let either act as the other.
            raise ValueError(f"a token of tenant {name!r} is given twice")
        owner[token] = name
        tokens[name] = (*tokens.get(name, ()), token)
    return tokens


def by_token(tokens: Mapping[str, tuple[SecretStr, ...]]) -> dict[str, str]:
    """Token to the name it belongs to, every token of every name included."""
    return {token.get_secret_value(): name for name, held in tokens.items() for token in held}
