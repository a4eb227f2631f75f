"""The simulator's memory on disk: an append-only journal of every change, one JSON line each.

A line is written for each object as it is made and each time it changes (its whole state),
each balance transaction, each idempotency record, each report run, each delayed change
scheduled and each one applied. Lines gather while the core holds its lock and are written
(and handed to the OS) before the lock is let go, so before any answer's bytes leave: a
process killed after answering has lost nothing it acknowledged (the OS keeps what was
written; no fsync, so a power cut may). Without a data directory nothing is written.
`replay.replay` reads the journal back at start.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import IO, Any

import orjson

from railsim.objects import Charge, Payout, Reversal, Transfer, Wire

JOURNAL_NAME = "journal.jsonl"
Made = Transfer | Payout | Charge
_KINDS: dict[type, str] = {Transfer: "transfer", Payout: "payout", Charge: "charge"}


class Journal:
    """Lines noted during one locked call, written together when it ends."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._file: IO[bytes] | None = None
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._file = (directory / JOURNAL_NAME).open("ab")
        self._lines: list[bytes] = []

    @property
    def enabled(self) -> bool:
        """Whether lines are kept at all (callers skip building them otherwise)."""
        return self._file is not None

    @property
    def path(self) -> Path | None:
        """The journal file, if the simulator keeps one."""
        return None if self.directory is None else self.directory / JOURNAL_NAME

    def note(self, record: Wire) -> None:
        """Keep `record` for the next write (nothing without a data directory)."""
        if self._file is not None:
            self._lines.append(orjson.dumps(record))

    def write(self) -> None:
        """Hand every line noted so far to the OS, in order."""
        if self._file is None or not self._lines:
            return
        self._lines.append(b"")  # the last line ends with a newline too
        self._file.write(b"\n".join(self._lines))
        self._file.flush()
        self._lines.clear()

    def restart(self) -> None:
        """Forget the journal: what follows is all there is (a reset)."""
        self._lines.clear()
        if self._file is not None:
            self._file.truncate(0)
            self._file.seek(0)

    def close(self) -> None:
        """Write what is noted and let go of the file."""
        self.write()
        if self._file is not None:
            self._file.close()
            self._file = None


def object_record(obj: Made, *, api: bool = False) -> Wire:
    """The journal line of `obj` as it is now; `api` when settle's calls made it (read from
    the line that first names an object only)."""
    return {"k": "obj", "type": _KINDS[type(obj)], "api": api, "v": dataclasses.asdict(obj)}


def object_of(record: Wire) -> Made:
    """The object an `obj` line holds."""
    state: dict[str, Any] = dict(record["v"])
    kind = record["type"]
    if kind == "transfer":
        state["reversals"] = [Reversal(**r) for r in state.get("reversals", [])]
        return Transfer(**state)
    if kind == "payout":
        return Payout(**state)
    if kind == "charge":
        return Charge(**state)
    raise ValueError(f"a journal line of an unknown object kind {kind!r}")
