"""A bulk seed of objects as if made at the rail over time, for benchmarks that need a rail
holding a million transfers without a million create calls (`POST /_sim/seed`).

    {"transfers": [{"id", "amount", "currency", "destination", "created", "metadata"}],
     "payouts":   [{"id", "amount", "currency", "destination", "created", "metadata",
                    "status"}]}

Seeded objects are listed and retrieved like any other and counted as effects; they send no
webhook and move no balance. A body that is not this shape raises SeedError.
"""

from __future__ import annotations

from typing import Any

import orjson

from railsim.errors import RailSimError
from railsim.objects import Payout, Transfer

PAYOUT_STATUSES = frozenset({"pending", "paid", "failed"})


class SeedError(RailSimError):
    """A seed body the simulator cannot take."""


def seeded(body: bytes) -> list[Transfer | Payout]:
    """The objects of a seed body, oldest first (the order the rail lists from)."""
    try:
        doc = orjson.loads(body)
        objects: list[Transfer | Payout] = [_transfer(t) for t in doc.get("transfers", [])]
        objects += [_payout(p) for p in doc.get("payouts", [])]
    except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as e:
        raise SeedError(f"a seed is {{'transfers': [...], 'payouts': [...]}}: {e!r}") from e
    objects.sort(key=lambda o: o.created)
    return objects


def _transfer(item: dict[str, Any]) -> Transfer:
    return Transfer(
        _text(item, "id", "tr_"),
        _int(item, "amount"),
        _text(item, "currency"),
        _text(item, "destination"),
        _int(item, "created"),
        metadata=_metadata(item),
    )


def _payout(item: dict[str, Any]) -> Payout:
    status = item.get("status", "paid")
    if status not in PAYOUT_STATUSES:
        raise ValueError(f"a payout's status is one of {sorted(PAYOUT_STATUSES)}, not {status!r}")
    return Payout(
        _text(item, "id", "po_"),
        _int(item, "amount"),
        _text(item, "currency"),
        item.get("destination"),
        _int(item, "created"),
        metadata=_metadata(item),
        status=status,
    )


def _text(item: dict[str, Any], key: str, prefix: str = "") -> str:
    value = item[key]
    if not isinstance(value, str) or not value.startswith(prefix) or not value:
        raise ValueError(f"`{key}` must be a string starting {prefix!r}, not {value!r}")
    return value


def _int(item: dict[str, Any], key: str) -> int:
    value = item[key]
    if type(value) is not int:
        raise ValueError(f"`{key}` must be an integer, not {value!r}")
    return value


def _metadata(item: dict[str, Any]) -> dict[str, str]:
    metadata = item.get("metadata") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("metadata maps strings to strings")
    return dict(metadata)
