"""Settings as a service loads them: read from the environment, each section validated and
refused where production mode (or Stripe's own API) would not move real money under it, or
where a process listening beyond this machine without `SETTLE_ENV` would serve the public
local secrets. `load_settings` raises the first refusal, `refusals` lists them all (for
`settle config check`): both run `_assessed`, so a check and a start never disagree."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import TypeVar, overload

from pydantic import SecretStr, ValidationError

from services.domain.errors import ConfigError
from services.platform.authority import (
    CommandSigningSection,
    OperatorSection,
    TenantSection,
    WebhookSection,
)
from services.platform.config import LOCAL_SECRETS, Section, held
from services.platform.sections import RailKeySection
from services.platform.service_settings import Settings

S = TypeVar("S", bound=Section)
SECRET_SECTIONS: tuple[type[Section], ...] = (
    RailKeySection,
    WebhookSection,
    TenantSection,
    OperatorSection,
    CommandSigningSection,
)


@overload
def load_settings(
    environ: Mapping[str, str] | None = None, *, host: str | None = None
) -> Settings: ...


@overload
def load_settings(
    environ: Mapping[str, str] | None = None, *, kind: type[S], host: str | None = None
) -> S: ...


def load_settings(
    environ: Mapping[str, str] | None = None,
    *,
    kind: type[Section] = Settings,
    host: str | None = None,
) -> Section:
    """`kind` read from `environ`, the process environment filling in what it leaves out
    (names in any case), for a process listening on `host` (None: none); ConfigError naming
    the variable when a value is bad or refused.

    In production a secret the service does not hold is still refused when it is given and
    weak, whoever holds it; one it holds but does not need, left unset, is held empty, so
    that nothing in the process can authenticate with the public local default."""
    settings, refused = _assessed(kind, dict(environ or {}), host)
    if refused or settings is None:
        raise refused[0]
    return _without_unneeded_secrets(settings)


def refusals(
    environ: Mapping[str, str] | None = None,
    *,
    kind: type[Section] = Settings,
    host: str | None = None,
) -> list[ConfigError]:
    """Every ConfigError `load_settings` with the same arguments stops at, the one it raises
    first; [] when it would load."""
    return _assessed(kind, dict(environ or {}), host)[1]


def _assessed(
    kind: type[S], given: Mapping[str, str], host: str | None
) -> tuple[S | None, list[ConfigError]]:
    settings, refused = _parsed(kind, given)
    if settings is None:
        return None, refused
    refused = settings.refusals()
    if settings.production:
        refused += _unheld_secret_refusals(kind, given)
    if host is not None:
        refused += _exposure_refusals(settings, host)
    return settings, refused


def _parsed(kind: type[S], given: Mapping[str, str]) -> tuple[S | None, list[ConfigError]]:
    # The settings, or every bad value named by its variable.
    try:
        return kind.model_validate(given), []
    except ValidationError as e:
        return None, [
            ConfigError(str(error["loc"][0]) if error["loc"] else "environment", error["msg"])
            for error in e.errors()
        ]
    except ConfigError as e:  # values that disagree with each other (the rails)
        return None, [e]


def _unheld_secret_refusals(kind: type[Section], given: Mapping[str, str]) -> list[ConfigError]:
    # A weak secret given to a service that does not hold it is refused all the same.
    named = given.keys() | {name.upper() for name in os.environ}
    found: list[ConfigError] = []
    for section in SECRET_SECTIONS:
        if not issubclass(kind, section) and named & section.SECRETS.keys():
            parsed, errors = _parsed(section, given)
            found += errors if parsed is None else parsed.secret_refusals()
    return found


def _exposure_refusals(settings: Section, host: str) -> list[ConfigError]:
    # SETTLE_ENV unset and a listener beyond loopback: the README's secrets would be served
    # to whoever reaches the port. SETTLE_ENV=local says so on purpose.
    if "env" in settings.model_fields_set or is_loopback(host):
        return []
    defaults = set(LOCAL_SECRETS.values())
    return [
        ConfigError(
            variable,
            f"holds the local default printed in the README while --host {host} listens "
            "beyond this machine and SETTLE_ENV is unset: give it a secret of its own and set "
            "SETTLE_ENV=production (SETTLE_ENV=local serves the defaults on purpose)",
        )
        for section in type(settings).__mro__
        for variable, field in vars(section).get("SECRETS", {}).items()
        if any(s.get_secret_value() in defaults for s in held(getattr(settings, field)))
    ]


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine's
    loopback; a name other than localhost is not taken to be."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: where it resolves is not known here


def _without_unneeded_secrets(settings: S) -> S:
    if not settings.production:
        return settings
    unset = {
        field
        for section in type(settings).__mro__
        for variable, field in vars(section).get("SECRETS", {}).items()
        if field not in settings.model_fields_set and not settings.needs(variable)
    }
    # What an unneeded, unset secret becomes: nothing that can authenticate.
    empty = {field: _emptied(getattr(settings, field)) for field in unset}
    return settings.model_copy(update=empty) if empty else settings


def _emptied(held: object) -> object:
    return SecretStr("") if isinstance(held, SecretStr) else type(held)()
