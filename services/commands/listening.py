"""The options that say where a service listens (its host, its port, its admin port), and the
settings a service starts with there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from services.domain.errors import ConfigError
from services.platform.config import Section
from services.platform.settings import load_settings

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
PORT = click.IntRange(1, 65535)
S = TypeVar("S", bound=Section)

host_option: Decorator = click.option("--host", default="127.0.0.1", show_default=True)


def port_option(default: int, what: str, *names: str) -> Decorator:
    """`--port` (or `names`, the first being the one shown) with its default and purpose."""
    return click.option(
        *(names or ("--port",)), "port", default=default, show_default=True, type=PORT, help=what
    )


def admin_port_option(default: int, what: str) -> Decorator:
    """`--admin-port`: operators' and Prometheus's port, apart from the public one."""
    return click.option("--admin-port", default=default, show_default=True, type=PORT, help=what)


def service_settings(kind: type[S], host: str) -> S:
    """The settings of the service `kind` listening on `host`, as it starts with them; a bad
    or refused setting (a public local secret served beyond loopback among them) ends the
    command, naming its variable."""
    try:
        return load_settings(kind=kind, host=host)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
