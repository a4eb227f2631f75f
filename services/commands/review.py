"""`settle review list|show|resolve`: settlements under review, resolved against the rail.

`resolve ID --as paid|failed|retry --reason TEXT --operator NAME` is refused (exit 1, with
its code) unless the rail, looked up at that moment, agrees; `--from-file FILE` resolves
every id in the file (one a line), each its own audited action, and prints a summary. In
two-person mode (SETTLE_TWO_PERSON) each is proposed instead, for `settle approvals approve`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from services.commands.common import (
    DONE,
    REFUSED,
    database,
    desk,
    echo_document,
    echo_json,
    echo_listing,
    fail,
    json_option,
    operator_option,
    proven,
    rail_url_option,
    reason_option,
    run,
)
from services.domain.instruction import Resolution
from services.platform.service_settings import Settings

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
    from services.operations.review import list_review, parse_id

    async def work(settings: Settings) -> None:
        async with database(settings) as pool:
            items = await list_review(pool, parse_id(after) if after else None, limit)
        echo_listing(items, as_json, _review_line)

    run("review", as_json, work)


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
    from services.operations.review import show as show_one

    async def work(settings: Settings) -> None:
        async with database(settings) as pool:
            item = await show_one(pool, settlement_id)
        echo_document(item, as_json)

    run("review", as_json, work)


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
@rail_url_option
@json_option
def resolve(
    settlement_id: str | None,
    resolution: str,
    reason: str,
    operator: str,
    from_file: Path | None,
    rail_url: str | None,
    as_json: bool,
) -> None:
    """Resolve settlements under review as paid, failed or retry, if the rail agrees."""
    from services.domain.proposal import ProposedAction
    from services.operations import bulk

    if (settlement_id is None) == (from_file is None):
        fail("review", as_json, "usage", "give one SETTLEMENT_ID or --from-file FILE", 2)

    listed = from_file.read_text() if from_file is not None else ""

    async def work(settings: Settings) -> int:
        proven(settings, operator)
        async with desk(settings, rail=True, rail_url=rail_url) as operations:

            async def act(sid: str) -> Submitted:
                return await operations.act(
                    ProposedAction.REVIEW_RESOLVE,
                    sid,
                    {"as": resolution},
                    reason=reason,
                    operator=operator,
                )

            if from_file is None:
                _print_resolved(await act(str(settlement_id)), as_json)
                return DONE
            outcomes = await bulk.each(bulk.lines_of(listed), act)
        echo_json(bulk.summary(outcomes))
        return REFUSED if any(not o.done for o in outcomes) else DONE

    raise SystemExit(run("review", as_json, work))


def _print_resolved(done: Submitted, as_json: bool) -> None:
    """One resolution done or proposed, as JSON or as a line."""
    from services.operations.approvals import awaiting

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
