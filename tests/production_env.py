"""A production environment every production-mode check accepts, for tests to vary."""

from __future__ import annotations

import json

API_KEY = "sk_live_51Hq7c2eZvKYlo2C0aNx4f8"
WEBHOOK_SECRET = "whsec_5b1e0c87d4a2f96e3b70c1d8"
ACME_TOKEN = "acme-7f3a9c2e51b04d68"
OPS_TOKEN = "ops-c41d8e7b2a9f0635"
KAFKA_PASSWORD = "kafka-3e9b71c05d2a48f6"
SIGNING_SECRET = "csk-9d04b6e1a7c3f258"
# Each tenant's caps: production mode refuses a tenant without an amount cap and an allow-list.
LIMITS = {"max_amount": {"EUR": 5_000_000, "USD": 5_000_000}, "destinations": ["acct_1Q2w3E"]}
DATABASE_URL = (
    "postgresql+asyncpg://settle_app:pw@db.internal:5432/settle"
    "?sslmode=verify-full&sslrootcert=/etc/settle/pg-ca.pem"
)


def limits_for(*tenants: str) -> str:
    """`SETTLE_TENANT_LIMITS` giving each of `tenants` the accepted limits."""
    return json.dumps(dict.fromkeys(tenants, LIMITS))


PRODUCTION = {
    "SETTLE_ENV": "production",
    "SETTLE_DATABASE_URL": DATABASE_URL,
    "SETTLE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "SETTLE_KAFKA_SASL_USERNAME": "settle",
    "SETTLE_KAFKA_SASL_PASSWORD": KAFKA_PASSWORD,
    "SETTLE_RAIL": "stripe",
    "STRIPE_API_KEY": API_KEY,
    "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET,
    "SETTLE_API_TOKENS": f"acme:{ACME_TOKEN}",
    "SETTLE_OPERATOR_TOKENS": f"ops:{OPS_TOKEN}",
    "SETTLE_COMMAND_SIGNING_SECRETS": f"acme:{SIGNING_SECRET}",
    "SETTLE_TENANT_LIMITS": limits_for("acme"),
    # An operator's command line: the operator API and the operator's own token.
    "SETTLE_OPERATOR_API": "https://operators.settle.internal",
    "SETTLE_OPERATOR_TOKEN": OPS_TOKEN,
}


def production(**changes: str | None) -> dict[str, str]:
    """The accepted production environment with `changes` (None: the variable unset)."""
    env: dict[str, str | None] = {**PRODUCTION, **changes}
    return {k: v for k, v in env.items() if v is not None}
