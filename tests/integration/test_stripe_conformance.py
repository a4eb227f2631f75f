"""The Stripe adapter against stripe-mock, Stripe's OpenAPI-validating mock, and real sockets.

stripe-mock rejects any request the real API's schema rejects, so an ACCEPTED here means the
path, method and every parameter we send are ones Stripe knows. It keeps no state: lookups
find nothing, and idempotency is not exercised (the rail simulator's tests cover that).
Build it with deploy/stripe-mock/install.sh; without it those tests fail and say how.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import stripe

from services.adapters.stripe.http import StripeHTTP
from services.adapters.stripe.outcomes import outcome_of_error
from services.adapters.stripe.rail import StripeRail
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailOutcome
from tests.waiting import eventually_blocking
from tools.infra.procs import free_ports, port_open

pytestmark = pytest.mark.integration

API_KEY = "sk_test_conformance"
STARTUP_SECONDS = 30.0  # stripe-mock parses Stripe's whole OpenAPI document at start


def stripe_mock_binary() -> Path | None:
    """stripe-mock from STRIPE_MOCK_BIN, PATH or $GOPATH/bin, if it is anywhere."""
    given = os.environ.get("STRIPE_MOCK_BIN")
    if given:
        if not Path(given).is_file():
            pytest.fail(f"STRIPE_MOCK_BIN={given} is not a file")
        return Path(given)
    on_path = shutil.which("stripe-mock")
    if on_path:
        return Path(on_path)
    gopath = Path(os.environ.get("GOPATH", Path.home() / "go"))
    candidate = gopath / "bin" / "stripe-mock"
    return candidate if candidate.is_file() else None


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    """Return once `port` accepts connections; fail if the process dies or time runs out."""

    def listening() -> bool:
        if process.poll() is not None:
            pytest.fail(f"stripe-mock exited with {process.returncode} before listening")
        return port_open("127.0.0.1", port)

    eventually_blocking(listening, STARTUP_SECONDS, f"stripe-mock listening on {port}")


@pytest.fixture(scope="module")
def stripe_mock() -> Iterator[str]:
    """The base URL of a stripe-mock of this module's own, stopped afterwards."""
    binary = stripe_mock_binary()
    if binary is None:
        # A missing mock must not pass for a conforming adapter: fail, never skip.
        pytest.fail(
            "stripe-mock not found in STRIPE_MOCK_BIN, PATH or $GOPATH/bin; "
            "build it with deploy/stripe-mock/install.sh (needs Go)"
        )
    port = free_ports()
    # Given only an HTTP address, stripe-mock also claims HTTPS on *:12112; keep that on
    # loopback and on a port the system picks, so that parallel runs never collide.
    process = subprocess.Popen(
        [str(binary), "-http-addr", f"127.0.0.1:{port}", "-https-addr", "127.0.0.1:"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
async def rail(stripe_mock: str) -> AsyncIterator[StripeRail]:
    """A StripeRail pointed at stripe-mock."""
    adapter = StripeRail(API_KEY, api_base=stripe_mock)
    yield adapter
    await adapter.aclose()


def instruction(method: PayoutMethod, amount: int = 1250) -> RailInstruction:
    """A rail instruction with ids of its own."""
    suffix = os.urandom(6).hex()
    destination = "acct_conf" if method is PayoutMethod.TRANSFER else "ba_conf"
    return RailInstruction(
        settlement_id=f"stl_{suffix}",
        tenant="acme",
        idempotency_key=os.urandom(32).hex(),
        destination=destination,
        amount=amount,
        currency="EUR",
        method=method,
    )


async def test_a_transfer_request_passes_stripes_schema(rail: StripeRail) -> None:
    result = await rail.send(instruction(PayoutMethod.TRANSFER))

    assert result.outcome is RailOutcome.ACCEPTED, result
    assert result.rail_reference is not None and result.rail_reference.startswith("tr_")


async def test_a_payout_request_passes_stripes_schema(rail: StripeRail) -> None:
    result = await rail.send(instruction(PayoutMethod.PAYOUT))

    assert result.outcome is RailOutcome.ACCEPTED, result
    assert result.rail_reference is not None and result.rail_reference.startswith("po_")


@pytest.mark.parametrize("method", list(PayoutMethod))
async def test_lookups_pass_stripes_schema(rail: StripeRail, method: PayoutMethod) -> None:
    # stripe-mock's fixtures carry no metadata of ours: a valid request that finds nothing.
    # An invalid list parameter would have raised RailLookupFailed instead.
    since = datetime.now(UTC) - timedelta(days=3)
    assert await rail.find(instruction(method), since=since) is None
    assert await rail.find(instruction(method)) is None


async def test_an_amount_stripe_cannot_hold_is_refused(rail: StripeRail) -> None:
    result = await rail.send(instruction(PayoutMethod.TRANSFER, amount=10**25))

    assert (result.outcome, result.status) == (RailOutcome.REFUSED, 400)


async def test_stripes_own_validation_error_classifies_as_refused(stripe_mock: str) -> None:
    # The adapter always sends a destination, so a bare client leaves it out to get Stripe's
    # real schema error, and hands that to the adapter's classifier.
    http = StripeHTTP(10.0)
    client = stripe.StripeClient(
        API_KEY, base_addresses={"api": stripe_mock}, max_network_retries=0, http_client=http
    )
    try:
        with pytest.raises(stripe.StripeError) as caught:
            no_destination = {"amount": 100, "currency": "eur"}
            await client.v1.transfers.create_async(no_destination)  # type: ignore[arg-type]
    finally:
        await http.close_async()

    result = outcome_of_error(caught.value)
    assert (result.outcome, result.detail, result.status) == (
        RailOutcome.REFUSED,
        "invalid_request_error",
        400,
    )


async def test_a_refused_connection_is_retryable() -> None:
    adapter = StripeRail(API_KEY, api_base=f"http://127.0.0.1:{free_ports()}")
    try:
        result = await adapter.send(instruction(PayoutMethod.TRANSFER))
    finally:
        await adapter.aclose()

    assert (result.outcome, result.detail) == (RailOutcome.RETRYABLE, "not_sent")


async def test_a_rail_that_takes_the_request_and_never_answers_is_ambiguous() -> None:
    received, release = asyncio.Event(), asyncio.Event()

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        received.set()
        await release.wait()
        writer.close()

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    adapter = StripeRail(API_KEY, api_base=f"http://127.0.0.1:{port}", timeout=0.5)
    try:
        result = await adapter.send(instruction(PayoutMethod.TRANSFER))
    finally:
        await adapter.aclose()
        release.set()
        server.close()
        await server.wait_closed()

    assert received.is_set()
    assert (result.outcome, result.detail) == (RailOutcome.AMBIGUOUS, "timeout")
