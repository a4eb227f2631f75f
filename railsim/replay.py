"""The journal read back at start: the state the simulator had when it stopped or was killed.

Lines are applied in the order written: the last state of each object wins, objects list in
the order they were first made, balance transactions and report runs as booked, idempotency
records as stored (the window still applies), delayed changes still waiting are scheduled
again. A last line cut short by a kill (no newline, or not JSON) was never acknowledged: it
is cut off the file, so the journal continues cleanly after what was whole.
"""

from __future__ import annotations

from pathlib import Path

import orjson

from railsim.errors import JournalError
from railsim.idempotency import Stored
from railsim.journal import JOURNAL_NAME, Made, object_of
from railsim.listing import Ordered, R
from railsim.objects import Charge, Transfer, Wire
from railsim.params import Kind
from railsim.replies import Reply
from railsim.reports import run_of
from railsim.state import State


def journal_records(directory: Path) -> list[Wire]:
    """Every whole line of the journal in `directory`, in order; a last line cut short is cut
    off the file; JournalError if a line before the last is broken."""
    path = directory / JOURNAL_NAME
    if not path.is_file():
        return []
    records: list[Wire] = []
    whole, torn = 0, 0  # bytes of whole lines; the number of the first broken line
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if torn:
                raise JournalError(f"{path}: line {torn} is broken and more lines follow it")
            try:
                if not line.endswith(b"\n"):
                    raise ValueError("no newline")
                records.append(orjson.loads(line))
            except ValueError:  # orjson's decode error is one too
                torn = number
                continue
            whole += len(line)
    if torn:
        with path.open("r+b") as file:
            file.truncate(whole)
    return records


def replay(records: list[Wire], state: State) -> None:
    """Rebuild `state` (fresh) from the journal's `records`."""
    waiting: dict[int, tuple[float, str, str]] = {}
    for record in records:
        kind = record["k"]
        if kind == "open":
            state.opened = float(record["at"])
        elif kind == "obj":
            _restore(state, object_of(record), api=bool(record.get("api")))
        elif kind == "txn":
            state.book.keep(record["v"])
        elif kind == "swept":
            state.book.assign(record["payout"], record["txns"])
        elif kind == "timer":
            waiting[record["seq"]] = (record["due"], record["action"], record["id"])
        elif kind == "fired":
            waiting.pop(record["seq"], None)
        elif kind == "key":
            _remember(state, record)
        elif kind == "run":
            run = run_of(record)
            _replace(state.runs, run.id, run)
    state.timers.restore(waiting)
    state.waiting_runs = [run for run in state.runs.records if run.status == "pending"]


def _restore(state: State, obj: Made, *, api: bool) -> None:
    """Take `obj` as made (the first time its id is read) or as it now is (later lines)."""
    if isinstance(obj, Charge):
        _replace(state.charges, obj.id, obj)
        return
    kind = Kind.TRANSFER if isinstance(obj, Transfer) else Kind.PAYOUT
    if obj.id not in state.objects and api:
        state.effects.count(kind, obj.metadata.get("settlement_id"))
    state.objects[obj.id] = obj
    _replace(state.listed[kind], obj.id, obj)
    if isinstance(obj, Transfer):
        state.reversed_by.update((r.id, obj) for r in obj.reversals)


def _replace(ordered: Ordered[R], record_id: str, record: R) -> None:
    """Put `record` in `ordered` in place of the one with its id, or as the newest."""
    position = ordered.position.get(record_id)
    if position is None:
        ordered.add(record_id, record)
    else:
        ordered.records[position] = record


def _remember(state: State, record: Wire) -> None:
    reply = Reply(
        int(record["status"]),
        str(record["body"]).encode(),
        str(record["req"]),
        created_id=record.get("id"),
    )
    state.keys.remember(str(record["key"]), Stored(str(record["fp"]), reply, float(record["at"])))
