"""What each setting means, for docs/configuration.md (tools/docs/config_page.py).

The variables, their defaults and which service reads them come from the code; only the
meaning is written here. The page's generator refuses a variable the code reads that has no
meaning below, and a meaning below for a variable the code no longer reads."""

from __future__ import annotations

# Settings read through the settings classes (services/platform/), by alias.
SETTINGS: dict[str, str] = {
    "SETTLE_ENV": "`local` or `production`. `production` refuses local defaults, weak secrets, "
    "cleartext or unverified links, the simulator, unpinned rail addresses, opt-outs and tenants "
    "without limits ([Production safety](production-safety.md)); unset, a service listening "
    "beyond loopback refuses the local secrets",
    "SETTLE_FAILPOINTS": "crash and pause points for tests ([the relay](relay.md)); "
    "production refuses any",
    "SETTLE_DATABASE_URL": "`postgresql://` or `postgresql+asyncpg://` URL; in production it "
    "verifies the server's certificate (`sslmode=verify-full` or `verify-ca`). Set, settle uses "
    "that server and starts none of its own",
    "SETTLE_DATABASE_POOLED": "`true` when `SETTLE_DATABASE_URL` goes through a "
    "transaction-mode pooler (PgBouncer): the pool then keeps no prepared statements",
    "SETTLE_KAFKA_BOOTSTRAP": "`host:port[,host:port...]`. Set, settle uses those brokers and "
    "starts none of its own",
    "SETTLE_KAFKA_SECURITY_PROTOCOL": "`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`; "
    "production needs `SASL_SSL`, or `SSL` with a client certificate",
    "SETTLE_KAFKA_SASL_MECHANISM": "`SCRAM-SHA-512`, `SCRAM-SHA-256` or `PLAIN`",
    "SETTLE_KAFKA_SASL_USERNAME": "the SASL login's user",
    "SETTLE_KAFKA_SASL_PASSWORD": "the SASL login's password, held as a secret (16+ characters "
    "in production)",
    "SETTLE_KAFKA_SSL_CAFILE": "CA file the brokers' certificates are checked against (unset: "
    "the system CAs)",
    "SETTLE_KAFKA_SSL_CERTFILE": "client certificate, for mutual TLS",
    "SETTLE_KAFKA_SSL_KEYFILE": "client key, for mutual TLS",
    "SETTLE_TOPIC_PREFIX": "prefix for every topic name and consumer group (tests use one per "
    "test); letters, digits, `.`, `_`, `-`",
    "SETTLE_RAIL": "`sim`, `stripe` or `sepa`: the one rail driven here (shorthand for "
    "`SETTLE_RAILS`)",
    "SETTLE_RAILS": "the rails driven here, in order of preference, comma-separated "
    "(`stripe,sepa`; locally `sim,sepa`); at most one of `sim` and `stripe`; wins over "
    "`SETTLE_RAIL` (unset: `SETTLE_RAIL` alone)",
    "SETTLE_TENANT_RAILS": "default rail per tenant and currency: `tenant:CURRENCY=rail` pairs, "
    "comma-separated (`acme:EUR=sepa,acme:USD=stripe`); each rail must be one of `SETTLE_RAILS`",
    "SETTLE_SEPA_BANK_URL": "the bank's host-to-host interface (`settle banksim` locally); in "
    "production https on a host of `SETTLE_RAIL_HOSTS`",
    "SETTLE_SEPA_DEBTOR_IBAN": "the account settle pays from (the default is a test account); "
    "must be set in production",
    "SETTLE_SEPA_DEBTOR_NAME": "the debtor's name, at most 70 characters",
    "SETTLE_SEPA_DEBTOR_BIC": "the debtor's bank's BIC (optional in SEPA)",
    "SETTLE_SEPA_BATCH_BOOKING": "whether the bank books each payment block as one debit "
    "(`BtchBookg`)",
    "SETTLE_SEPA_CUTOFF": "the bank's cut-off, Central European time: a file built after it is "
    "dated the next TARGET2 business day",
    "STRIPE_API_KEY": "secret key for the Stripe client (a local test key by default; "
    "a restricted read key is enough for the reconciler and the console)",
    "STRIPE_API_BASE": "base URL of the Stripe API (the simulator, stripe-mock; unset: Stripe's "
    "own); in production `https://api.stripe.com` or https on a host of `SETTLE_RAIL_HOSTS`",
    "SETTLE_RAIL_HOSTS": "the hosts production lets a rail's address name besides Stripe's own "
    "(a Stripe proxy, the SEPA bank), comma-separated host names",
    "SETTLE_STRIPE_METHOD": "`transfer` (Connect transfers) or `payout`",
    "SETTLE_RAIL_IDEMPOTENT": "`false` for a rail that ignores idempotency keys (the relay looks "
    "transfers up by settlement id instead)",
    "STRIPE_WEBHOOK_SECRET": "webhook signing secret; several, comma-separated, during a rotation",
    "SETTLE_API_TOKENS": "`tenant:token` pairs, comma-separated; a tenant may hold several during "
    "a rotation; one token for two tenants and the tenant `platform` (settle's own accounts) are "
    "refused",
    "SETTLE_OPERATOR_TOKENS": "`name:token` pairs (or `name:sha256:<hex>`, the token's digest) "
    "for the operator API (the reconciler) and the console; the name is the actor audited",
    "SETTLE_TWO_PERSON": "whether actions that move money or close a break wait for a second "
    "operator's approval (maker-checker), besides the database's own setting (`settle approvals "
    "two-person`); unset: on in production, else off; production refuses `false`",
    "SETTLE_PROPOSAL_MAX_AGE_SECONDS": "how long a proposal waits for a decision before it expires",
    "SETTLE_OPERATOR_API": "for the operator commands: the operator API's address (the "
    "reconciler's port); `https://` in production, plain `http://` only on loopback",
    "SETTLE_OPERATOR_TOKEN": "for the operator commands: the operator's own token, which names "
    "who acts (one of the server's `SETTLE_OPERATOR_TOKENS`)",
    "SETTLE_OPERATOR_CA": "for the operator commands: the CA file the operator API's certificate "
    "is checked against (unset: the system CAs)",
    "SETTLE_COMMAND_SIGNING": "`required` or `optional`: whether every Kafka command must carry "
    "its tenant's signature; unset: `required` in production, else `optional`; production "
    "refuses `optional`",
    "SETTLE_COMMAND_SIGNING_SECRETS": "`tenant:secret` pairs, several per tenant during a rotation",
    "SETTLE_TENANT_LIMITS": "JSON: tenant → `max_amount` {currency: minor units}, `destinations` "
    "[ids], `prefunded` {currency: deposit}, `rate` and `read_rate` {`per_second`, `burst`}, "
    "each the whole deployment's, shared among the live ledger replicas (`read_rate` defaults to "
    "100/s, burst 200, for a tenant with an entry); every key optional, but production asks each "
    "tenant of `SETTLE_API_TOKENS` for a `max_amount` and `destinations` or `prefunded`",
    "SETTLE_ACCEPT_BACKLOG": "settlement requests a ledger process holds at once before HTTP "
    "answers 503 `overloaded` and the Kafka intake pauses",
    "SETTLE_IDEMPOTENCY_REPLAY_SECONDS": "how long a key replays its first response",
    "SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS": "how long after that a key answers 410 before it may "
    "be reused",
    "SETTLE_IDEMPOTENCY_RETENTION_HOURS": "age at which a key record whose request completed and "
    "whose settlement is final is deleted; never less than replay + tombstone (fractions allowed)",
    "SETTLE_IDEMPOTENCY_CLEANUP_SECONDS": "seconds between the ledger's key cleanup sweeps",
    "SETTLE_IDEMPOTENCY_CLEANUP_BATCH": "most key records one cleanup statement reads",
    "SETTLE_RELAY_LEASE_SECONDS": "how long a relay holds a claimed rail instruction; its rail "
    "calls time out at a third of it (at most 10 s)",
    "SETTLE_INBOX_MAX_BODY_BYTES": "largest webhook body the inbox reads (413 `body_too_large` "
    "above it)",
    "SETTLE_INBOX_PARK_ATTEMPTS": "tries of a `parked` webhook (no settlement yet) before it "
    "goes `dead` with its reason",
    "SETTLE_INBOX_RETRY_SECONDS": "first delay before a parked webhook is tried again; doubles "
    "with jitter",
    "SETTLE_INBOX_RETRY_MAX_SECONDS": "the longest delay between two tries of a parked webhook",
    "SETTLE_INBOX_WORKERS": "apply loops in one inbox process",
    "SETTLE_RECONCILE_INTERVAL": "seconds between the reconciler's intraday runs (`settle run`: 5)",
    "SETTLE_RECONCILE_RECHECK_AGES": "re-check ages, strictly growing; units s, m, h, d; a bare "
    "number is seconds (default `1h,1d,7d,30d`)",
    "SETTLE_RECONCILE_GRACE_SECONDS": "how long an item handed to the rail may lag before it is a "
    "break rather than pending (`settle run`: 10)",
    "SETTLE_RECONCILE_OVERLAP_SECONDS": "how far before the last intraday run's end the next one "
    "reads again, for objects the rail lists late (items still pending are judged by the "
    "re-checks)",
    "SETTLE_RECONCILE_READ_RATE": "reads a second a reconciliation run may make of the rail's API "
    "(list pages, retrieves, the balance), at most 9 at once: Stripe's read limit for a live "
    "account",
    "SETTLE_OTEL_EXPORTER": "where spans go: `none` (the OpenTelemetry SDK is not loaded; trace "
    "ids are still carried), `console` or `otlp` (configured by the standard "
    "`OTEL_EXPORTER_OTLP_*` variables)",
    "SETTLE_LOG_FORMAT": "the services' log lines: `json` or `text`",
    "SETTLE_LOG_LEVEL": "the least a service logs: `debug` adds each settlement's routine steps "
    "(a webhook applied, a rail call accepted), `warning` keeps only trouble",
}

# Read with os.environ by the development tools, or by a library settle uses.
DIRECT: dict[str, tuple[str, str]] = {
    "SETTLE_RUN_DIR": (
        "`tools/infra/paths.py`",
        "where `settle infra`, `settle run` and the tests keep the local PostgreSQL and Kafka, "
        "logs and caches (unset: `.run/` in the checkout); point it elsewhere when the "
        "`postgres` user cannot reach the checkout",
    ),
    "STRIPE_LOG": (
        "the `stripe` library",
        "the `stripe` library's own log level (`debug`, `info`); settle's Stripe adapter "
        "honours it (`services/adapters/stripe/logs.py`)",
    ),
}

# Read by the test suite and its helper scripts only.
TESTS: dict[str, tuple[str, str]] = {
    "SETTLE_ALLOW_SKIPS": (
        "`tests/conftest.py`",
        "`1` lets a skipped test pass; otherwise a skip fails the run",
    ),
    "SETTLE_TEST_INFRA_MARK": (
        "`tests/harness.py`",
        "set by the suite itself: marks the PostgreSQL and Kafka a test run started, so its last "
        "step stops only those",
    ),
    "SETTLE_SCREENSHOTS": (
        "`tests/browser/chromium.py`",
        "where the browser tests save their screenshots, relative to the checkout (default "
        "`.run/screenshots`; `docs/console` refreshes the manual's)",
    ),
    "STRIPE_MOCK_BIN": (
        "`tests/integration/test_stripe_conformance.py`",
        "the stripe-mock binary (else found on PATH or in `$GOPATH/bin`)",
    ),
    "STRIPE_MOCK_VERSION": (
        "`deploy/stripe-mock/install.sh`",
        "the stripe-mock version `make test` builds",
    ),
    "STRIPE_MOCK_REBUILD": (
        "`deploy/stripe-mock/install.sh`",
        "`1` builds stripe-mock again even when it is installed",
    ),
}
