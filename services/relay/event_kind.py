"""A settlement event's type, read from the head of its message without decoding the rest.

The dispatch trigger reads every SettlementEvent on the topic, four or five per settlement,
for the one that is `created`; a whole decode costs about as much as a tenth of a rail call.
The current schema begins with string fields up to `type` (event_id, settlement_id, tenant,
reference, type), so a message that the current schema wrote is read only that far. A
message of an older writer, or one whose head does not read, gets None: the caller decodes
it whole, which also says why a bad one is bad.
"""

from __future__ import annotations

from typing import Any

from services.contracts import avro

EVENT = "SettlementEvent"


class EventKinds:
    """Reads the `type` of SettlementEvent messages written with `writer`'s schema."""

    def __init__(self, writer: avro.Writer) -> None:
        fields: list[dict[str, Any]] = writer.schema["fields"]
        names = [field["name"] for field in fields]
        self._header = writer.header
        # Only strings may come before `type`: each is a length and its bytes, easy to skip.
        leading = fields[: names.index("type") + 1] if "type" in names else []
        plain = bool(leading) and all(field["type"] == "string" for field in leading)
        self._skip = len(leading) - 1 if plain else -1

    def kind(self, message: bytes) -> bytes | None:
        """The event's `type` as UTF-8 bytes, e.g. b"created"; None when the message must
        be decoded whole (another writer's schema, or a head that does not read)."""
        if self._skip < 0 or not message.startswith(self._header):
            return None
        at = len(self._header)
        try:
            for _ in range(self._skip):
                at = _string(message, at)[1]
            start, end = _string(message, at)
        except IndexError:
            return None
        return message[start:end]


def _string(message: bytes, at: int) -> tuple[int, int]:
    """Where the bytes of the Avro string at `at` start and end; IndexError if it runs past
    the message or its length is not one."""
    value, shift = 0, 0
    while True:
        byte = message[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise IndexError("a varint longer than a long")
    length = (value >> 1) ^ -(value & 1)  # zigzag
    if length < 0 or at + length > len(message):
        raise IndexError("a string length past the message")
    return at, at + length
