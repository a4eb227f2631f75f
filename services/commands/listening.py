"""The options that say where a service listens: its host, its port, its admin port."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
PORT = click.IntRange(1, 65535)

host_option: Decorator = click.option("--host", default="127.0.0.1", show_default=True)


def port_option(default: int, what: str, *names: str) -> Decorator:
    """`--port` (or `names`, the first being the one shown) with its default and purpose."""
    return click.option(
        *(names or ("--port",)), "port", default=default, show_default=True, type=PORT, help=what
    )


def admin_port_option(default: int, what: str) -> Decorator:
    """`--admin-port`: operators' and Prometheus's port, apart from the public one."""
    return click.option("--admin-port", default=default, show_default=True, type=PORT, help=what)
