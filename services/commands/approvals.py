"""`settle approvals list|approve|reject|withdraw|policy|two-person`: maker-checker, the
second operator's side, through the operator API.

In two-person mode (the server's SETTLE_TWO_PERSON, on in production, or the database's own
setting) `settle review resolve`, `settle breaks resolve` and the other actions that move money
or close a break propose; a different operator approves here, and the server does the action
then, against the rail as it stands, audited with both names. Exit status as the other
operator commands: 1 when refused (the proposer approving their own, a token that is not the
named operator's, a proposal decided or expired, the rail contradicting the action: the
proposal then ends `failed`), 3 for no such proposal. `policy` shows the mode in force;
`two-person on|off` changes the database's (turning it off is itself proposed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

import click

from services.commands.common import (
    DONE,
    echo_document,
    echo_listing,
    json_option,
    operator_option,
    reason_option,
    through_api,
)
from services.commands.operator_api import OperatorApi, segment
from services.domain.proposal import Move, ProposalStatus

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

    async def work(api: OperatorApi) -> None:
        found = await api.get("/v1/approvals", {"status": status, "after": after, "limit": limit})
        echo_listing(found["data"], as_json, _proposal_line)

    through_api("approvals", as_json, work)


def _proposal_line(p: Mapping[str, Any]) -> str:
    return (
        f"{p['id']}  {p['status']}  {p['action']}  {p['target']}  "
        f"{p['payload']}  by {p['proposed_by']}  {p['reason'] or ''}"
    )


def _decide(move: Move, proposal_id: str, operator: str, as_json: bool, **given: str) -> NoReturn:
    """Decide the proposal through the operator API as `operator`, print it, and exit."""

    async def work(api: OperatorApi) -> int:
        _, done = await api.post(f"/v1/approvals/{segment(proposal_id)}/{move.value}", given)
        echo_document(done, as_json)
        return DONE

    raise SystemExit(through_api("approvals", as_json, work, operator))


@approvals.command()
@click.argument("proposal_id")
@operator_option
@json_option
def approve(proposal_id: str, operator: str, as_json: bool) -> None:
    """Approve another operator's proposal: its action is done now, if the rail agrees."""
    _decide(Move.APPROVE, proposal_id, operator, as_json)


@approvals.command()
@click.argument("proposal_id")
@operator_option
@click.option("--reason", default=None, help="Why it is refused: kept with the proposal.")
@json_option
def reject(proposal_id: str, operator: str, reason: str | None, as_json: bool) -> None:
    """Refuse another operator's proposal; nothing is done."""
    given = {} if reason is None else {"reason": reason}
    _decide(Move.REJECT, proposal_id, operator, as_json, **given)


@approvals.command()
@click.argument("proposal_id")
@operator_option
@json_option
def withdraw(proposal_id: str, operator: str, as_json: bool) -> None:
    """Take back one's own pending proposal."""
    _decide(Move.WITHDRAW, proposal_id, operator, as_json)


@approvals.command()
@json_option
def policy(as_json: bool) -> None:
    """The approval policy in force: two-person mode (the server's and the database's) and
    how long a proposal waits."""

    async def work(api: OperatorApi) -> None:
        echo_document(await api.get("/v1/policy"), as_json)

    through_api("approvals", as_json, work)


@approvals.command("two-person")
@click.argument("mode", type=click.Choice(["on", "off"]))
@reason_option
@operator_option
@json_option
def two_person(mode: str, reason: str, operator: str, as_json: bool) -> None:
    """Turn the database's two-person mode on, or off (proposed for a second operator while
    it is on)."""
    from services.commands.common import awaiting

    async def work(api: OperatorApi) -> int:
        body = {"on": mode == "on", "reason": reason}
        status, done = await api.post("/v1/policy/two-person", body)
        if status == 202 and not as_json:
            click.echo(awaiting(done))
        else:
            echo_document(done, as_json)
        return DONE

    raise SystemExit(through_api("approvals", as_json, work, operator))
