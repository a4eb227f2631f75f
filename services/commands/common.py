"""What the operator commands share: the operator API they talk to (`through_api`), how an
error is printed (text, or one JSON object with its machine-readable code) and the exit
status it ends with; the database the owner's commands open (`database`). In production mode
the rail is the one configured: a `--rail-url` is refused (`pinned_rail_url`, which every
command with the option calls).

    0  done (every item of a bulk action)
    1  refused (any item of a bulk action): the rail, or the item's status, disagrees
    2  a source could not be read: the configuration, PostgreSQL or the rail
    3  no such settlement or break
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import asyncpg
import click

from services.commands.operator_api import Answered, ApiUnreachable, OperatorApi, operator_api
from services.domain.errors import ApiError, ConfigError, StoreUnavailable
from services.operations.errors import NotFound, RailUnavailable
from services.platform.config import Section
from services.platform.sections import DatabaseSection
from services.platform.service_settings import OperatorCommandSettings, Settings
from services.platform.settings import load_settings

if TYPE_CHECKING:
    pass

DONE, REFUSED, UNREADABLE, NOT_FOUND = 0, 1, 2, 3
T = TypeVar("T")

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON, not text.")
operator_option = click.option(
    "--operator", required=True, help="Who acts: the name the audit row keeps."
)
reason_option = click.option("--reason", required=True, help="Why: kept in the audit row.")


def pinned_rail_url(
    settings: Section, rail_url: str | None, option: str = "--rail-url"
) -> str | None:
    """`rail_url`, an operator's `--rail-url` (or another address `option`), as given;
    ConfigError in production mode, where the rail's address is configuration
    (STRIPE_API_BASE on a host SETTLE_RAIL_HOSTS names, or Stripe's own), never one command's
    option."""
    if rail_url is not None and settings.production:
        raise ConfigError(
            option,
            "is refused in production mode: the rail's address is STRIPE_API_BASE (on a host "
            "SETTLE_RAIL_HOSTS names) or Stripe's own; drop the option",
        )
    return rail_url


def exit_status(error: ApiError) -> int:
    """The exit status an error ends the command with (the operator API's answers alike)."""
    if isinstance(error, NotFound) or (isinstance(error, Answered) and error.status == 404):
        return NOT_FOUND
    if isinstance(error, StoreUnavailable | RailUnavailable | ApiUnreachable):
        return UNREADABLE
    return REFUSED


def fail(command: str, as_json: bool, code: str, message: str, status: int) -> NoReturn:
    """Print the error (JSON on stdout, or text on stderr) and exit with `status`."""
    if as_json:
        click.echo(json.dumps({"ok": False, "error": {"code": code, "message": message}}))
    else:
        click.echo(f"settle {command}: {code}: {message}", err=True)
    raise SystemExit(status)


def run(command: str, as_json: bool, work: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Run `work` with the settings; a refusal or an unreadable source ends the command with
    its code printed and its exit status."""
    try:
        return asyncio.run(work(load_settings()))
    except ConfigError as e:  # the settings, or an option they refuse (`pinned_rail_url`)
        fail(command, as_json, "config", str(e), UNREADABLE)
    except ApiError as e:
        fail(command, as_json, e.code, e.message, exit_status(e))


def through_api(
    command: str,
    as_json: bool,
    work: Callable[[OperatorApi], Coroutine[Any, Any, T]],
    operator: str | None = None,
) -> T:
    """Run `work` with a client of the operator API (as `operator`, or the token's own); a
    refusal, an unreachable API or a refused setting ends the command with its code printed
    and its exit status."""

    async def with_client() -> T:
        settings = load_settings(kind=OperatorCommandSettings)
        async with operator_api(settings, operator) as api:
            return await work(api)

    try:
        return asyncio.run(with_client())
    except ConfigError as e:
        fail(command, as_json, "config", str(e), UNREADABLE)
    except ApiError as e:
        fail(command, as_json, e.code, e.message, exit_status(e))


@asynccontextmanager
async def database(
    settings: DatabaseSection, as_owner: bool = False
) -> AsyncIterator[asyncpg.Pool]:
    """A small pool on the settings' database (as the tables' owner: see create_pool), closed
    after."""
    from services.adapters.postgres.database import create_pool

    try:
        pool = await create_pool(settings, max_size=2, as_owner=as_owner)
    except (OSError, asyncpg.PostgresError) as e:
        raise StoreUnavailable(f"PostgreSQL is unreachable: {e}") from e
    try:
        yield pool
    finally:
        await pool.close()


def awaiting(proposal: Mapping[str, Any]) -> str:
    """The line telling an operator that their action awaits a second operator."""
    return (
        f"proposal {proposal['id']}: {proposal['action']} {proposal['target']} awaits approval "
        f"by another operator (settle approvals approve {proposal['id']})"
    )


def echo_json(document: object) -> None:
    """One JSON document on stdout, keys sorted."""
    click.echo(json.dumps(document, sort_keys=True))


def echo_listing(
    documents: Sequence[Mapping[str, Any]], as_json: bool, line: Callable[[Mapping[str, Any]], str]
) -> None:
    """A listing: `{"data": [...]}` as one JSON document, or each item on its `line`."""
    if as_json:
        echo_json({"data": list(documents)})
        return
    for document in documents:
        click.echo(line(document))


def echo_document(document: Mapping[str, object], as_json: bool) -> None:
    """One item: a JSON document, or its fields one `key: value` line each, keys sorted."""
    if as_json:
        echo_json(document)
        return
    for key in sorted(document):
        click.echo(f"{key}: {document[key]}")
