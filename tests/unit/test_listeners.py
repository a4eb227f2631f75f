"""Which app a request reaches: the admin app only for what arrived on the admin port; the
two ports must differ."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner
from starlette.types import Receive, Scope, Send

from services.platform.listeners import ByPort, Listeners, ListeningServer
from tools.cli import cli


class Recording:
    """An ASGI app that only records that it was called."""

    def __init__(self) -> None:
        self.seen: list[Scope] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.seen.append(scope)


async def _nothing() -> Any:
    return {}


async def _ignore(_: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("server", "reaches"),
    [
        (("127.0.0.1", 9081), "admin"),
        (("10.0.0.7", 9081), "admin"),  # bound to 0.0.0.0: the local address varies
        (("127.0.0.1", 8081), "public"),
        (("127.0.0.1", 9999), "public"),
        (None, "public"),  # a local port unknown: never the admin app
    ],
)
async def test_requests_reach_the_app_of_the_port_they_arrived_on(
    server: tuple[str, int] | None, reaches: str
) -> None:
    public, admin = Recording(), Recording()
    app = ByPort(Listeners(public, admin), admin_port=9081)
    await app({"type": "http", "path": "/metrics", "server": server}, _nothing, _ignore)
    assert (len(public.seen), len(admin.seen)) == ((0, 1) if reaches == "admin" else (1, 0))


def test_the_admin_port_cannot_be_the_public_port() -> None:
    apps = Listeners(Recording(), Recording())
    with pytest.raises(ValueError, match="admin port must differ"):
        ListeningServer(apps, "127.0.0.1", 8081, 8081)


@pytest.mark.parametrize("service", ["ledger", "inbox"])
def test_a_service_refuses_one_port_for_both_listeners(service: str) -> None:
    result = CliRunner().invoke(cli, [service, "--port", "8500", "--admin-port", "8500"])
    assert result.exit_code == 2
    assert "--admin-port must differ from --port" in result.output
