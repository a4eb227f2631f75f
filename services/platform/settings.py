"""Settings as a service loads them: read from the environment, each section validated and
refused where production mode (or Stripe's own API) would not move real money under it."""

from __future__ import annotations

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
from services.platform.config import Section
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
def load_settings(environ: Mapping[str, str] | None = None) -> Settings: ...


@overload
def load_settings(environ: Mapping[str, str] | None = None, *, kind: type[S]) -> S: ...


def load_settings(
    environ: Mapping[str, str] | None = None, *, kind: type[Section] = Settings
) -> Section:
    """`kind` read from `environ`, the process environment filling in what it leaves out
    (names in any case); ConfigError naming the variable when a value is bad or refused.

    In production a secret the service does not hold is still refused when it is given and
    weak, whoever holds it; one it holds but does not need, left unset, is held empty, so
    that nothing in the process can authenticate with the public local default."""
    given = dict(environ or {})
    settings = _validated(kind, given)
    named = given.keys() | {name.upper() for name in os.environ}
    for section in SECRET_SECTIONS:
        held = issubclass(kind, section)
        if settings.production and not held and named & section.SECRETS.keys():
            _validated(section, given)  # refuses the weak secret given
    return _without_unneeded_secrets(settings)


def _validated(kind: type[S], given: Mapping[str, str]) -> S:
    try:
        return kind.model_validate(given)
    except ValidationError as e:
        first = e.errors()[0]
        variable = str(first["loc"][0]) if first["loc"] else "environment"
        raise ConfigError(variable, first["msg"]) from e


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
