"""The sections that say who may do what: tenants' tokens and command signatures, the rail's
webhook secret, operators' tokens and maker-checker, and each tenant's limits."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, ClassVar

from pydantic import Field, InstanceOf, SecretStr, field_validator
from pydantic_settings import NoDecode

from services.contracts.command_signature import CommandSigning
from services.domain.errors import ConfigError
from services.domain.postings import PLATFORM
from services.domain.proposal import DEFAULT_MAX_AGE_SECONDS
from services.domain.tenant_limits import NO_LIMITS, TenantLimits, parse_tenant_limits
from services.platform.config import LOCAL_SECRETS, RotatedSecrets, Section, SigningSecrets, Tokens
from services.platform.tokens import by_token


class TenantSection(Section):
    """Each tenant's bearer tokens (`tenant:token` pairs, several while one is rotated)."""

    SECRETS: ClassVar[dict[str, str]] = {"SETTLE_API_TOKENS": "api_tokens"}

    api_tokens: Tokens = Field(
        {"acme": (SecretStr(LOCAL_SECRETS["SETTLE_API_TOKENS"]),)}, alias="SETTLE_API_TOKENS"
    )

    @field_validator("api_tokens")
    @classmethod
    def _not_settles_own(cls, tokens: dict[str, tuple[SecretStr, ...]]) -> object:
        # settle's own accounts (a rail's charges) are booked under this name.
        if PLATFORM in tokens:
            raise ValueError(f"{PLATFORM!r} names settle's own accounts; no tenant may take it")
        return tokens

    @property
    def tenant_by_token(self) -> dict[str, str]:
        """Bearer token to tenant, the lookup the HTTP layer does on every request."""
        return by_token(self.api_tokens)


class WebhookSection(Section):
    """The secrets the rail signs its webhooks with (several accepted during a rotation)."""

    SECRETS: ClassVar[dict[str, str]] = {"STRIPE_WEBHOOK_SECRET": "stripe_webhook_secret"}

    stripe_webhook_secret: RotatedSecrets = Field(
        (SecretStr(LOCAL_SECRETS["STRIPE_WEBHOOK_SECRET"]),), alias="STRIPE_WEBHOOK_SECRET"
    )


class OperatorSection(Section):
    """Operators' tokens (`name:token` pairs), whether a resolution or replay waits for a
    second operator (unset: in production mode only), and how long a proposal waits."""

    SECRETS: ClassVar[dict[str, str]] = {"SETTLE_OPERATOR_TOKENS": "operator_tokens"}

    operator_tokens: Tokens = Field(
        {"ops": (SecretStr(LOCAL_SECRETS["SETTLE_OPERATOR_TOKENS"]),)},
        alias="SETTLE_OPERATOR_TOKENS",
    )
    two_person: bool | None = Field(None, alias="SETTLE_TWO_PERSON")
    proposal_max_age_seconds: int = Field(
        DEFAULT_MAX_AGE_SECONDS, alias="SETTLE_PROPOSAL_MAX_AGE_SECONDS", gt=0
    )

    @property
    def operator_by_token(self) -> dict[str, str]:
        """Bearer token to operator name, for the operator endpoints."""
        return by_token(self.operator_tokens)

    @property
    def two_person_required(self) -> bool:
        """Whether an operator's resolution or replay needs a second operator's approval."""
        return self.production if self.two_person is None else self.two_person

    def production_refusals(self) -> Iterator[ConfigError]:
        if self.two_person is False:
            yield ConfigError(
                "SETTLE_TWO_PERSON",
                "is false; production mode has a second operator approve every resolution "
                "and replay: set it to true, or leave it unset",
            )


LOCAL_OPERATOR_API = "http://127.0.0.1:8084"  # `settle reconciler`'s default address


class OperatorClientSection(Section):
    """What an operator's command line holds: the operator API's address and the operator's
    own token (the server holds the database, the rail's key and the policy), and the CA
    that signed the API's certificate when it is not one the system trusts."""

    SECRETS: ClassVar[dict[str, str]] = {"SETTLE_OPERATOR_TOKEN": "operator_token"}

    operator_api: str = Field(LOCAL_OPERATOR_API, alias="SETTLE_OPERATOR_API")
    operator_token: SecretStr = Field(
        SecretStr(LOCAL_SECRETS["SETTLE_OPERATOR_TOKENS"]), alias="SETTLE_OPERATOR_TOKEN"
    )
    operator_ca: str | None = Field(None, alias="SETTLE_OPERATOR_CA")

    @field_validator("operator_api")
    @classmethod
    def _an_http_address(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be the operator API's http:// or https:// address")
        return value.rstrip("/")

    def production_refusals(self) -> Iterator[ConfigError]:
        if not self.operator_api.startswith("https://"):
            yield ConfigError(
                "SETTLE_OPERATOR_API",
                "must be https:// in production mode: the operator's token goes with every request",
            )


class CommandSigningSection(Section):
    """Kafka commands signed by their tenant: required, optional (unset: required in
    production, optional locally), under each tenant's secrets (`tenant:secret` pairs)."""

    SECRETS: ClassVar[dict[str, str]] = {
        "SETTLE_COMMAND_SIGNING_SECRETS": "command_signing_secrets"
    }

    command_signing: CommandSigning | None = Field(None, alias="SETTLE_COMMAND_SIGNING")
    command_signing_secrets: SigningSecrets = Field({}, alias="SETTLE_COMMAND_SIGNING_SECRETS")

    @property
    def command_signing_required(self) -> bool:
        """Whether every Kafka command must carry its tenant's signature."""
        if self.command_signing is None:
            return self.production
        return self.command_signing is CommandSigning.REQUIRED

    def production_refusals(self) -> Iterator[ConfigError]:
        if self.command_signing is CommandSigning.OPTIONAL:
            yield ConfigError(
                "SETTLE_COMMAND_SIGNING",
                "is optional; production mode takes only Kafka commands signed by their "
                "tenant: set it to required, or leave it unset",
            )

    def needs(self, variable: str) -> bool:
        # Needed where commands must be signed; then every tenant that may send commands
        # needs one (checked by the ledger when it starts).
        if variable == "SETTLE_COMMAND_SIGNING_SECRETS":
            return self.command_signing_required
        return super().needs(variable)


class LimitsSection(Section):
    """Per-tenant caps, allow-lists, deposits and rates (JSON, read by
    domain/tenant_limits.py), and how many settlement requests a ledger process holds at
    once (HTTP in flight and Kafka commands being booked) before answering 503. In
    production, where the tenants' tokens are held too, every tenant has limits."""

    tenant_limits: Annotated[InstanceOf[TenantLimits], NoDecode] = Field(
        NO_LIMITS, alias="SETTLE_TENANT_LIMITS"
    )
    accept_backlog: int = Field(10_000, alias="SETTLE_ACCEPT_BACKLOG", ge=1)

    @field_validator("tenant_limits", mode="before")
    @classmethod
    def _limits(cls, value: object) -> object:
        return parse_tenant_limits(value) if isinstance(value, str) else value

    def production_refusals(self) -> Iterator[ConfigError]:
        # The tenants given in SETTLE_API_TOKENS, where these settings hold them (the ledger:
        # those who may ask for settlements); unset, the tokens are refused themselves.
        if not isinstance(self, TenantSection) or "api_tokens" not in self.model_fields_set:
            return
        for tenant in self.api_tokens:
            missing = self.tenant_limits.unguarded(tenant)
            if missing:
                yield ConfigError(
                    "SETTLE_TENANT_LIMITS",
                    f"gives tenant {tenant!r} no {' and no '.join(missing)}; production mode "
                    "limits every tenant of SETTLE_API_TOKENS",
                )
