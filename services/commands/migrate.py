"""`settle migrate`: the database schema to head (or to a revision, up or down) and the Kafka
topics created."""

from __future__ import annotations

import asyncio
import time

import click

from services.adapters.kafka.access import kafka_access
from services.adapters.postgres.migrate import (
    UnknownRevision,
    head_revision,
    migrate_to,
    step_down,
)
from services.adapters.postgres.migration_run import LOCK_TIMEOUT_MS
from services.domain.errors import ConfigError
from services.platform.service_settings import MigrateSettings
from services.platform.settings import load_settings


@click.command(
    short_help="Migrate PostgreSQL to the latest schema and create the Kafka topics settle uses."
)
@click.option("--skip-topics", is_flag=True, help="Only migrate PostgreSQL.")
@click.option(
    "--replication-factor",
    default=1,
    show_default=True,
    type=click.IntRange(1, 7),
    help="Replicas of each topic it creates (3 on a production cluster).",
)
@click.option(
    "--to",
    "target",
    metavar="REV",
    help="Move the schema up or down to revision REV (head, base, or one like 0027); "
    "schema only, no topics.",
)
@click.option("--downgrade", is_flag=True, help="Undo the schema's latest migration; schema only.")
@click.option(
    "--lock-timeout-ms",
    default=LOCK_TIMEOUT_MS,
    show_default=True,
    type=click.IntRange(1, 600_000),
    help="How long a statement waits for a table's lock before its migration is rolled "
    "back and tried again (a few times, with a growing pause).",
)
def migrate(
    skip_topics: bool,
    replication_factor: int,
    target: str | None,
    downgrade: bool,
    lock_timeout_ms: int,
) -> None:
    """Migrate PostgreSQL to the latest schema and create the Kafka topics settle uses; or,
    with --to or --downgrade, move the schema alone to another revision. Each migration
    commits on its own; see docs/migrations.md."""
    from services.adapters.kafka.topics import ensure_topics

    if target is not None and downgrade:
        raise click.UsageError("give --to or --downgrade, not both")
    try:
        settings = load_settings(kind=MigrateSettings)
        access = kafka_access(settings)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    started = time.monotonic()
    try:
        if downgrade:
            before, after = step_down(settings.database_url, lock_timeout_ms=lock_timeout_ms)
        else:
            before, after = migrate_to(
                settings.database_url,
                target or "head",
                production=settings.production,
                lock_timeout_ms=lock_timeout_ms,
            )
    except UnknownRevision as e:
        raise click.ClickException(str(e)) from e
    moved = f"from {before or 'base'}, {time.monotonic() - started:.1f}s"
    where = f"head {after}" if after == head_revision() else after or "base"
    click.echo(f"database migrated to {where} ({moved})")
    if not skip_topics and target is None and not downgrade:
        created = asyncio.run(ensure_topics(access, settings.topic_prefix, replication_factor))
        click.echo(f"topics created: {', '.join(created) if created else 'none (all exist)'}")
