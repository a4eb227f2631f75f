"""`settle breaks write-off|adjust|correct|match|assign|comment|reopen`: an operator's work on
one reconciliation break, through the operator API (services/operations/break_actions.py says
what each reads and does):

    write-off ID --reason TEXT --operator NAME
    adjust    ID --account rail_fees|write_offs|suspense --direction debit|credit
                 --amount MINOR_UNITS --currency CUR --reason TEXT --operator NAME
    correct   ID --as reversed|failed|paid --reason TEXT --operator NAME
    match     ID --settlement SETTLEMENT_ID --reason TEXT --operator NAME
    assign    ID (--to NAME | --nobody) --operator NAME
    comment   ID --text TEXT --operator NAME
    reopen    ID --reason TEXT --operator NAME

In two-person mode the first four are proposed for `settle approvals
approve`; assign, comment and reopen are done at once. Exit status as `settle breaks`.
"""

from __future__ import annotations

from typing import Any

import click

from services.commands.common import (
    DONE,
    echo_json,
    fail,
    json_option,
    operator_option,
    reason_option,
    through_api,
)
from services.commands.operator_api import OperatorApi, segment
from services.domain.break_work import BreakAction


def act(
    action: BreakAction,
    break_id: str,
    payload: dict[str, Any],
    *,
    reason: str | None,
    operator: str,
    as_json: bool,
) -> None:
    """Do (or have the server propose) `action` on the break as `operator`, print the
    outcome, and exit."""
    from services.commands.common import awaiting

    name = action.value.removeprefix("break.")
    body = payload if reason is None else {**payload, "reason": reason}

    async def work(api: OperatorApi) -> int:
        status, done = await api.post(f"/v1/breaks/{segment(break_id)}/{name}", body)
        if as_json:
            echo_json(done)
        elif status == 202:
            click.echo(awaiting(done))
        else:
            click.echo(f"{break_id}: {name} done")
        return DONE

    raise SystemExit(through_api("breaks", as_json, work, operator))


@click.command("write-off")
@click.argument("break_id")
@reason_option
@operator_option
@json_option
def write_off(break_id: str, reason: str, operator: str, as_json: bool) -> None:
    """Book an open break's amount to the platform's loss account and resolve it."""
    act(BreakAction.WRITE_OFF, break_id, {}, reason=reason, operator=operator, as_json=as_json)


@click.command()
@click.argument("break_id")
@click.option("--account", required=True, help="rail_fees, write_offs or suspense.")
@click.option("--direction", required=True, help="debit (from funding) or credit (back).")
@click.option("--amount", required=True, type=int, help="Minor units, above zero.")
@click.option("--currency", required=True, help="ISO 4217, e.g. EUR.")
@reason_option
@operator_option
@json_option
def adjust(
    break_id: str,
    account: str,
    direction: str,
    amount: int,
    currency: str,
    reason: str,
    operator: str,
    as_json: bool,
) -> None:
    """Book an amount between the platform's funding and one of its accounts."""
    payload = {"account": account, "direction": direction, "amount": amount, "currency": currency}
    act(BreakAction.ADJUST, break_id, payload, reason=reason, operator=operator, as_json=as_json)


@click.command()
@click.argument("break_id")
@click.option("--as", "correction", required=True, help="reversed, failed or paid.")
@reason_option
@operator_option
@json_option
def correct(break_id: str, correction: str, reason: str, operator: str, as_json: bool) -> None:
    """Move the break's settlement where the rail shows it is, if the rail agrees now."""
    act(
        BreakAction.CORRECT,
        break_id,
        {"as": correction},
        reason=reason,
        operator=operator,
        as_json=as_json,
    )


@click.command()
@click.argument("break_id")
@click.option("--settlement", "settlement_id", required=True, help="The settlement it paid.")
@reason_option
@operator_option
@json_option
def match(break_id: str, settlement_id: str, reason: str, operator: str, as_json: bool) -> None:
    """Record the break's rail object as the settlement's, if the rail agrees now."""
    act(
        BreakAction.MATCH,
        break_id,
        {"settlement_id": settlement_id},
        reason=reason,
        operator=operator,
        as_json=as_json,
    )


@click.command()
@click.argument("break_id")
@click.option("--to", "assignee", default=None, help="The operator who works on it.")
@click.option("--nobody", is_flag=True, help="Nobody works on it any more.")
@operator_option
@json_option
def assign(break_id: str, assignee: str | None, nobody: bool, operator: str, as_json: bool) -> None:
    """Give an open break to an operator (or to nobody)."""
    if (assignee is None) == (not nobody):
        fail("breaks", as_json, "usage", "give one of --to NAME or --nobody", 2)
    payload = {"assignee": None if nobody else assignee}
    act(BreakAction.ASSIGN, break_id, payload, reason=None, operator=operator, as_json=as_json)


@click.command()
@click.argument("break_id")
@click.option("--text", required=True, help="The note, kept for good.")
@operator_option
@json_option
def comment(break_id: str, text: str, operator: str, as_json: bool) -> None:
    """Add a note to a break."""
    payload = {"text": text}
    act(BreakAction.COMMENT, break_id, payload, reason=None, operator=operator, as_json=as_json)


@click.command()
@click.argument("break_id")
@reason_option
@operator_option
@json_option
def reopen(break_id: str, reason: str, operator: str, as_json: bool) -> None:
    """Take a resolved break back to open."""
    act(BreakAction.REOPEN, break_id, {}, reason=reason, operator=operator, as_json=as_json)


WORK: tuple[click.Command, ...] = (write_off, adjust, correct, match, assign, comment, reopen)
