"""`settle breaks list|show|resolve|export` and the work on one break
(`write-off|adjust|correct|match|assign|comment|reopen`, break_work.py): reconciliation breaks
as operators handle them, through the operator API.

`list` filters by status, type, age bucket (by first seen: 0-1d, 1-7d, 7-30d, 30d+),
currency and amount (the absolute difference, minor units), and shows who has each break.
`resolve ID --reason TEXT --operator NAME` closes an open break as resolved (healed and
resolved ones are final: exit 1, `break_closed`); `--all-of-type TYPE` and `--from-file FILE`
resolve many, each its own audited action, and print a summary; in two-person mode each
is proposed instead, for `settle approvals approve`.
`export --format csv|jsonl` streams the open breaks with their reason codes.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import click

from services.commands.break_work import WORK
from services.commands.common import (
    DONE,
    REFUSED,
    echo_document,
    echo_json,
    echo_listing,
    fail,
    json_option,
    operator_option,
    reason_option,
    through_api,
)
from services.commands.operator_api import OperatorApi, segment
from services.domain.break_work import AgingBucket
from services.domain.breaks import BreakStatus, BreakType

PAGE = 1000  # breaks asked for at a time when resolving all of a type

TYPES = click.Choice([t.value for t in BreakType])


@click.group()
def breaks() -> None:
    """Reconciliation breaks: list, show, resolve, correct the books, work on one."""


@breaks.command("list")
@click.option("--status", type=click.Choice([s.value for s in BreakStatus]), default=None)
@click.option("--type", "break_type", type=TYPES, default=None)
@click.option("--bucket", type=click.Choice([b.value for b in AgingBucket]), default=None)
@click.option("--currency", default=None, help="Only breaks in this currency, e.g. EUR.")
@click.option("--min-amount", type=click.IntRange(0), default=None, help="Minor units, at least.")
@click.option("--max-amount", type=click.IntRange(0), default=None, help="Minor units, at most.")
@click.option("--after", default=0, type=click.IntRange(0), help="List ids after this one.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 1000))
@json_option
def list_(
    status: str | None,
    break_type: str | None,
    bucket: str | None,
    currency: str | None,
    min_amount: int | None,
    max_amount: int | None,
    after: int,
    limit: int,
    as_json: bool,
) -> None:
    """Breaks by id, filtered by status, type, age, currency and amount."""
    query = {
        "status": status,
        "type": break_type,
        "bucket": bucket,
        "currency": currency,
        "min_amount": min_amount,
        "max_amount": max_amount,
        "after": after,
        "limit": limit,
    }

    async def work(api: OperatorApi) -> None:
        echo_listing((await api.get("/v1/breaks", query))["data"], as_json, _break_line)

    through_api("breaks", as_json, work)


def _break_line(b: Mapping[str, Any]) -> str:
    return (
        f"{b['id']}  {b['status']}  {b['type']}  {b['reason']}  age={b['age_bucket']}  "
        f"assignee={b['assignee'] or '-'}  settlement={b['settlement_id']}  "
        f"rail={b['rail_object_id']}"
    )


@breaks.command()
@click.argument("break_id")
@json_option
def show(break_id: str, as_json: bool) -> None:
    """One break, with its comments."""

    async def work(api: OperatorApi) -> None:
        echo_document(await api.get(f"/v1/breaks/{segment(break_id)}"), as_json)

    through_api("breaks", as_json, work)


@breaks.command()
@click.argument("break_id", required=False)
@reason_option
@operator_option
@click.option("--all-of-type", type=TYPES, default=None, help="Resolve every open break of it.")
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Resolve every break id in this file, one a line.",
)
@json_option
def resolve(
    break_id: str | None,
    reason: str,
    operator: str,
    all_of_type: str | None,
    from_file: Path | None,
    as_json: bool,
) -> None:
    """Resolve open breaks with a reason, each audited."""
    from services.commands.common import awaiting
    from services.operations import bulk
    from services.operations.approvals import Submitted

    if sum(x is not None for x in (break_id, all_of_type, from_file)) != 1:
        fail("breaks", as_json, "usage", "give one BREAK_ID, --all-of-type or --from-file", 2)

    listed = from_file.read_text() if from_file is not None else ""

    async def work(api: OperatorApi) -> int:
        async def act(item: str) -> Submitted:
            path = f"/v1/breaks/{segment(item)}/resolve"
            status, document = await api.post(path, {"reason": reason})
            return Submitted(status == 202, document)

        if break_id is not None:
            done = await act(break_id)
            if as_json:
                echo_json(done.document)
            elif done.proposed:
                click.echo(awaiting(done.document))
            else:
                click.echo(f"{done.document['id']}: resolved")
            return DONE
        ids = bulk.lines_of(listed) if from_file is not None else _open_ids(api, all_of_type)
        outcomes = await bulk.each(ids, act)
        echo_json(bulk.summary(outcomes))
        return REFUSED if any(not o.done for o in outcomes) else DONE

    raise SystemExit(through_api("breaks", as_json, work, operator))


async def _open_ids(api: OperatorApi, break_type: str | None) -> AsyncIterator[str]:
    """The ids of the open breaks of `break_type`, page by page, as they stand when each page
    is read."""
    after = 0
    while True:
        query = {"status": "open", "type": break_type, "after": after, "limit": PAGE}
        page = await api.get("/v1/breaks", query)
        for found in page["data"]:
            yield str(found["id"])
        if page["next_after"] is None or len(page["data"]) < PAGE:
            return
        after = int(page["next_after"])


@breaks.command()
@click.option(
    "--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="jsonl", show_default=True
)
@click.option("--type", "break_type", type=TYPES, default=None)
def export(fmt: str, break_type: str | None) -> None:
    """Stream the open breaks as CSV or JSON lines, each with its reason code."""

    async def work(api: OperatorApi) -> None:
        async for text in api.text("/v1/breaks/export", {"format": fmt, "type": break_type}):
            sys.stdout.write(text)
        sys.stdout.flush()

    through_api("breaks", False, work)


for _command in WORK:
    breaks.add_command(_command)
