"""`settle review list|show|resolve`: settlements under review, resolved against the rail,
through the operator API (SETTLE_OPERATOR_API, with the operator's own SETTLE_OPERATOR_TOKEN).

`resolve ID --as paid|failed|retry --reason TEXT --operator NAME` is refused (exit 1, with
its code) unless the rail, looked up by the server at that moment, agrees; `--from-file FILE`
resolves every id in the file (one a line), each its own audited action, and prints a
summary. In two-person mode each is proposed instead, for `settle approvals approve`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

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
from services.domain.instruction import Resolution

if TYPE_CHECKING:
    from services.operations.approvals import Submitted


@click.group()
def review() -> None:
    """Settlements under review (needs_review): list, show, resolve against the rail."""


@review.command("list")
@click.option("--after", default=None, help="List settlements with ids after this one.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 200))
@json_option
def list_(after: str | None, limit: int, as_json: bool) -> None:
    """Settlements under review, by id."""

    async def work(api: OperatorApi) -> None:
        found = await api.get("/v1/review", {"after": after, "limit": limit})
        echo_listing(found["data"], as_json, _review_line)

    through_api("review", as_json, work)


def _review_line(i: Mapping[str, Any]) -> str:
    return (
        f"{i['id']}  {i['amount']} {i['currency']}  instruction "
        f"{i['instruction_status']}  {i['reason']}"
    )


@review.command()
@click.argument("settlement_id")
@json_option
def show(settlement_id: str, as_json: bool) -> None:
    """One settlement with its rail instruction."""

    async def work(api: OperatorApi) -> None:
        echo_document(await api.get(f"/v1/review/{segment(settlement_id)}"), as_json)

    through_api("review", as_json, work)


@review.command()
@click.argument("settlement_id", required=False)
@click.option("--as", "resolution", required=True, type=click.Choice([r.value for r in Resolution]))
@reason_option
@operator_option
@click.option(
    "--from-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Resolve every settlement id in this file, one a line.",
)
@json_option
def resolve(
    settlement_id: str | None,
    resolution: str,
    reason: str,
    operator: str,
    from_file: Path | None,
    as_json: bool,
) -> None:
    """Resolve settlements under review as paid, failed or retry, if the rail agrees."""
    from services.operations import bulk
    from services.operations.approvals import Submitted

    if (settlement_id is None) == (from_file is None):
        fail("review", as_json, "usage", "give one SETTLEMENT_ID or --from-file FILE", 2)

    listed = from_file.read_text() if from_file is not None else ""
    body = {"as": resolution, "reason": reason}

    async def work(api: OperatorApi) -> int:
        async def act(sid: str) -> Submitted:
            status, document = await api.post(f"/v1/review/{segment(sid)}/resolve", body)
            return Submitted(status == 202, document)

        if from_file is None:
            _print_resolved(await act(str(settlement_id)), as_json)
            return DONE
        outcomes = await bulk.each(bulk.lines_of(listed), act)
        echo_json(bulk.summary(outcomes))
        return REFUSED if any(not o.done for o in outcomes) else DONE

    raise SystemExit(through_api("review", as_json, work, operator))


def _print_resolved(done: Submitted, as_json: bool) -> None:
    """One resolution done or proposed, as JSON or as a line."""
    from services.commands.common import awaiting

    if as_json:
        echo_json(done.document)
    elif done.proposed:
        click.echo(awaiting(done.document))
    else:
        d = done.document
        click.echo(
            f"{d['settlement_id']}: {d['resolution']}, settlement "
            f"{d['settlement']}, instruction {d['instruction']}"
        )
