"""`settle approvals list|approve|reject|withdraw`: maker-checker, the second operator's side.

In two-person mode (SETTLE_TWO_PERSON; on by default in production mode) `settle review
resolve`, `settle breaks resolve` and `settle inbox replay` propose; a different operator
approves here, and the action is done then, against the rail as it stands, audited with both
names. Exit status as the other operator commands: 1 when refused (the proposer approving
their own, a proposal decided or expired, the rail contradicting the action: the proposal
then ends `failed`), 3 for no such proposal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import click

from services.commands.common import (
    DONE,
    desk,
    echo_document,
    echo_listing,
    json_option,
    operator_option,
    proven,
    rail_url_option,
    run,
)
from services.domain.proposal import Move, ProposalStatus
from services.platform.service_settings import Settings

STATUSES = click.Choice([*(s.value for s in ProposalStatus), "any"])


@click.group()
def approvals() -> None:
    """Proposals awaiting a second operator: list, approve, reject, withdraw."""


@approvals.command("list")
@click.option("--status", type=STATUSES, default="pending", show_default=True)
@click.option("--after", default=0, type=click.IntRange(0), help="List ids after this one.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 200))
@json_option
def list_(status: str, after: int, limit: int, as_json: bool) -> None:
    """Proposals by id: pending ones, or those in --status."""

    async def work(settings: Settings) -> None:
        wanted = None if status == "any" else ProposalStatus(status)
        async with desk(settings) as operations:
            found = await operations.proposals(status=wanted, after=after, limit=limit)
        echo_listing(found, as_json, _proposal_line)

    run("approvals", as_json, work)


def _proposal_line(p: Mapping[str, Any]) -> str:
    return (
        f"{p['id']}  {p['status']}  {p['action']}  {p['target']}  "
        f"{p['payload']}  by {p['proposed_by']}  {p['reason'] or ''}"
    )


def _decide(
    move: Move, proposal_id: str, operator: str, as_json: bool, **given: str | None
) -> NoReturn:
    """Decide the proposal through the desk as `operator`, print it, and exit."""

    async def work(settings: Settings) -> int:
        proven(settings, operator)
        rail_url = given.get("rail_url")
        async with desk(settings, rail=move is Move.APPROVE, rail_url=rail_url) as operations:
            done = await operations.decide(
                move, proposal_id, operator=operator, reason=given.get("reason")
            )
        echo_document(done, as_json)
        return DONE

    raise SystemExit(run("approvals", as_json, work))


@approvals.command()
@click.argument("proposal_id")
@operator_option
@rail_url_option
@json_option
def approve(proposal_id: str, operator: str, rail_url: str | None, as_json: bool) -> None:
    """Approve another operator's proposal: its action is done now, if the rail agrees."""
    _decide(Move.APPROVE, proposal_id, operator, as_json, rail_url=rail_url)


@approvals.command()
@click.argument("proposal_id")
@operator_option
@click.option("--reason", default=None, help="Why it is refused: kept with the proposal.")
@json_option
def reject(proposal_id: str, operator: str, reason: str | None, as_json: bool) -> None:
    """Refuse another operator's proposal; nothing is done."""
    _decide(Move.REJECT, proposal_id, operator, as_json, reason=reason)


@approvals.command()
@click.argument("proposal_id")
@operator_option
@json_option
def withdraw(proposal_id: str, operator: str, as_json: bool) -> None:
    """Take back one's own pending proposal."""
    _decide(Move.WITHDRAW, proposal_id, operator, as_json)
