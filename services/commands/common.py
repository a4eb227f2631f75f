"""What `settle review` and `settle breaks` share: the database and rail they open, how an
error is printed (text, or one JSON object with its machine-readable code) and the exit
status it ends with. In production mode the rail is the one configured: an operator's
`--rail-url` is refused (`pinned_rail_url`, which every command with the option calls).

    0  done (every item of a bulk action)
    1  refused (any item of a bulk action): the rail, or the item's status, disagrees
    2  a source could not be read: the configuration, PostgreSQL or the rail
    3  no such settlement or break
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import asyncpg
import click

from services.domain.errors import ApiError, ConfigError, StoreUnavailable
from services.operations.errors import NotFound, RailUnavailable
from services.platform.authority import OperatorSection
from services.platform.config import Section
from services.platform.sections import DatabaseSection
from services.platform.service_settings import InboxSettings, Settings
from services.platform.settings import load_settings

if TYPE_CHECKING:
    from services.operations.desk import OperationsDesk

DONE, REFUSED, UNREADABLE, NOT_FOUND = 0, 1, 2, 3
T = TypeVar("T")

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON, not text.")
operator_option = click.option(
    "--operator", required=True, help="Who acts: the name the audit row keeps."
)
reason_option = click.option("--reason", required=True, help="Why: kept in the audit row.")
rail_url_option = click.option(
    "--rail-url",
    default=None,
    help="The rail's API base (default STRIPE_API_BASE); refused in production mode.",
)


def proven(settings: OperatorSection, operator: str) -> None:
    """In two-person mode, refuse unless SETTLE_OPERATOR_TOKEN is one of `operator`'s tokens
    (services/operations/operator_proof.py): a typed name alone proves nobody."""
    from services.operations.operator_proof import OPERATOR_TOKEN, prove_operator

    prove_operator(settings, operator, os.environ.get(OPERATOR_TOKEN))


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
    """The exit status an error ends the command with."""
    if isinstance(error, NotFound):
        return NOT_FOUND
    if isinstance(error, StoreUnavailable | RailUnavailable):
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


@asynccontextmanager
async def desk(
    settings: Settings | InboxSettings, *, rail: bool = False, rail_url: str | None = None
) -> AsyncIterator[OperationsDesk]:
    """The operations desk of a command, over a small pool and, with `rail`, the rail the
    settings name (or `rail_url`, where `pinned_rail_url` allows it; only settings that hold
    the rail's key can); closed after."""
    from services.operations.approval_policy import policy_of
    from services.operations.desk import OperationsDesk
    from services.operations.rail_lookup import NoRail, stripe_lookup

    rail_url = pinned_rail_url(settings, rail_url)
    owned = None
    if rail:
        assert isinstance(settings, Settings), "the rail is read with every section's settings"
        owned = stripe_lookup(settings, rail_url)
    try:
        async with database(settings) as pool:
            yield OperationsDesk(pool, owned or NoRail(), policy_of(settings))
    finally:
        if owned is not None:
            await owned.aclose()


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
