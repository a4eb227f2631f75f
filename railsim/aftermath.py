"""What follows a transfer or payout the simulator created: the events announcing it, and the
faults that strike after acceptance (the object made, then a 500; the answer held back)."""

from __future__ import annotations

import dataclasses

from railsim.announce import Withheld, announce
from railsim.faults import Dice, Faults
from railsim.objects import Wire
from railsim.replies import Reply, api_error


def after_creation(
    reply: Reply,
    wire: Wire,
    subject: str,
    key: str | None,
    now: float,
    faults: Faults,
    dice: Dice,
    withheld: Withheld,
) -> Reply:
    """`reply` to a create with the created event(s) about `wire` attached, then the faults
    that strike after the rail accepted applied (a 500 after creating, an answer held back)."""
    f = faults
    type_ = "transfer.created" if wire["object"] == "transfer" else "payout.created"
    webhooks = announce(
        type_,
        wire,
        at=now,
        subject=subject,
        faults=f,
        dice=dice,
        request_id=reply.request_id,
        withheld=withheld,
        idempotency_key=key,
    )
    reply = dataclasses.replace(
        reply,
        webhooks=webhooks,
        webhooks_first=dice.chance("webhook_early", subject, f.webhook_early),
    )
    if dice.chance("fail_after", subject, f.fail_after):
        return dataclasses.replace(
            api_error(reply.request_id),
            webhooks=reply.webhooks,
            webhooks_first=reply.webhooks_first,
            created_id=reply.created_id,
        )
    if dice.chance("timeout_after", subject, f.timeout_after):
        return dataclasses.replace(reply, hold_seconds=f.timeout_seconds)
    return reply
