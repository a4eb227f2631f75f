"""Keyset pages over bigint ids, read one way: a cursor or an id from text, and the cursor of
the page after a full one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

MAX_ID_DIGITS = 18  # every number of 18 digits fits a bigint; some of 19 do not
T = TypeVar("T")


def parse_id(text: str) -> int | None:
    """The id `text` spells (ASCII digits only, at most 18 of them), None when it spells none."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_ID_DIGITS:
        return int(text)
    return None


def next_after(ids: Sequence[T], page_size: int) -> T | None:
    """The cursor of the page after one holding `ids`: its last id when the page is full, else
    None (this was the last page)."""
    return ids[-1] if ids and len(ids) >= page_size else None
