"""The create calls, answered ahead of Starlette's routing, answer as Stripe does: the object
with Stripe's headers, the key echoed, refusals in Stripe's shape, their event queued; and
every other call still reaches its route."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping

import httpx
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from railsim.webhooks import WebhookSender

AUTH = {"Authorization": "Bearer sk_test_creates"}
FORM = {"amount": "1250", "currency": "usd", "destination": "acct_1"}


class Unanswered:
    """An endpoint that is never reached: the sender is not running in these tests."""

    url = "http://receiver.test/hooks"

    async def post(self, body: bytes, headers: Mapping[str, str]) -> int:
        raise AssertionError("no webhook is posted here")

    async def aclose(self) -> None:
        pass


@pytest.fixture
def sim() -> RailSim:
    return RailSim()


@pytest.fixture
def sender() -> WebhookSender:
    return WebhookSender(Unanswered.url, "whsec_test", endpoint=Unanswered())


@pytest.fixture
async def client(sim: RailSim, sender: WebhookSender) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(sim, sender))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as c:
        yield c


async def test_a_create_answers_the_object_with_stripes_headers_and_queues_its_event(
    client: httpx.AsyncClient, sim: RailSim, sender: WebhookSender
) -> None:
    answer = await client.post(
        "/v1/transfers", data=FORM, headers={**AUTH, "Idempotency-Key": "k1"}
    )
    assert answer.status_code == 200
    assert answer.json()["object"] == "transfer" and answer.json()["amount"] == 1250
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-length"] == str(len(answer.content))
    assert answer.headers["request-id"].startswith("req_")
    assert answer.headers["stripe-version"] == "2024-06-20"
    assert answer.headers["idempotency-key"] == "k1"
    assert "idempotent-replayed" not in answer.headers
    assert sender.stats()["pending"] == 1
    assert sim.effects()["total"] == 1


async def test_a_replay_is_the_same_bytes_marked_replayed_and_queues_nothing(
    client: httpx.AsyncClient, sim: RailSim, sender: WebhookSender
) -> None:
    keyed = {**AUTH, "Idempotency-Key": "k1"}
    first = await client.post("/v1/payouts", data=FORM, headers=keyed)
    again = await client.post("/v1/payouts", data=FORM, headers=keyed)
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["request-id"] == first.headers["request-id"]
    assert sender.stats()["pending"] == 1 and sim.effects()["total"] == 1


async def test_a_create_without_a_secret_key_is_a_401_that_echoes_no_key(
    client: httpx.AsyncClient, sim: RailSim
) -> None:
    answer = await client.post(
        "/v1/transfers", data=FORM, headers={"Authorization": "Bearer pk_x", "Idempotency-Key": "k"}
    )
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert "idempotency-key" not in answer.headers
    assert sim.effects()["total"] == 0


async def test_a_form_that_is_not_utf8_is_refused_in_stripes_shape(
    client: httpx.AsyncClient, sim: RailSim
) -> None:
    form = {**AUTH, "Content-Type": "application/x-www-form-urlencoded", "Idempotency-Key": "k"}
    answer = await client.post("/v1/transfers", content=b"amount=\xff", headers=form)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "parameter_invalid_string"
    assert answer.headers["idempotency-key"] == "k"
    assert sim.effects()["total"] == 0


async def test_other_calls_still_reach_their_routes(client: httpx.AsyncClient) -> None:
    await client.post("/v1/transfers", data=FORM, headers=AUTH)
    listed = await client.get("/v1/transfers", headers=AUTH)
    assert listed.status_code == 200 and len(listed.json()["data"]) == 1
    unknown = await client.post("/v1/transfers/tr_1", data=FORM, headers=AUTH)
    assert unknown.status_code == 404
    assert json.loads(unknown.content)["error"]["message"].startswith("Unrecognized request URL")
    assert (await client.get("/healthz")).status_code == 200
