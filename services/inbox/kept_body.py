"""A webhook's body as the inbox keeps it: the exact bytes the rail signed, compressed.

A rail's event is a JSON document of one to two kilobytes, below the size at which PostgreSQL
compresses a value itself, and it is written twice (stored, then applied). Compressed with
zlib it takes less than half of that in the table and in the WAL. A kept body starts with
`MARK`, which no JSON text begins with (0xFF is never a byte of UTF-8), so a body stored
uncompressed (an older inbox's, or a row written by hand) is read as it is.
"""

from __future__ import annotations

import zlib

MARK = b"\xffz"
LEVEL = 6  # zlib's default: a webhook takes about 30 microseconds


def kept(body: bytes) -> bytes:
    """`body` as it is stored."""
    return MARK + zlib.compress(body, LEVEL)


def received(stored: bytes) -> bytes:
    """The exact bytes the rail sent, from a stored body (compressed or not)."""
    if stored.startswith(MARK):
        return zlib.decompress(stored[len(MARK) :])
    return stored
