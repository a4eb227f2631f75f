"""Settings as a service loads them: read from the environment, validated
(services/platform/config.py), and refused when production mode would not move real money
under them (services/platform/production.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import ValidationError

from services.domain.errors import ConfigError
from services.platform.config import Settings
from services.platform.production import refusal, secrets_of, uses_kafka, without_unused_secrets


def load_settings(environ: Mapping[str, str] | None = None, service: str | None = None) -> Settings:
    """Read settings from `environ` (default: the process environment) or raise ConfigError,
    also when production mode (or Stripe's own API) refuses them for `service` (None: a
    command that may use every secret; see production.py)."""
    aliases = {f.alias for f in Settings.model_fields.values() if f.alias}
    given = {k: v for k, v in (environ or {}).items() if k in aliases}
    # The process environment fills in what `environ` leaves out (its names in any case).
    named = given.keys() | (aliases & {k.upper() for k in os.environ})
    try:
        settings = Settings.model_validate(given)
    except ValidationError as e:
        first = e.errors()[0]
        variable = str(first["loc"][0]) if first["loc"] else "environment"
        raise ConfigError(variable, first["msg"]) from e
    problem = refusal(settings, named, secrets_of(service), uses_kafka(service))
    if problem is not None:
        raise problem
    return without_unused_secrets(settings, named, secrets_of(service))
