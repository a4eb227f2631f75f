"""`settle migrate`: the database schema to head and the Kafka topics created."""

from __future__ import annotations

import asyncio
import time

import click

from services.adapters.kafka.access import kafka_access
from services.adapters.postgres.migrate import upgrade
from services.domain.errors import ConfigError
from services.platform.service_settings import MigrateSettings
from services.platform.settings import load_settings


@click.command()
@click.option("--skip-topics", is_flag=True, help="Only migrate PostgreSQL.")
@click.option(
    "--replication-factor",
    default=1,
    show_default=True,
    type=click.IntRange(1, 7),
    help="Replicas of each topic it creates (3 on a production cluster).",
)
def migrate(skip_topics: bool, replication_factor: int) -> None:
    """Migrate PostgreSQL to the latest schema and create the Kafka topics settle uses."""
    from services.adapters.kafka.topics import ensure_topics

    try:
        settings = load_settings(kind=MigrateSettings)
        access = kafka_access(settings)
    except ConfigError as e:
        raise click.ClickException(str(e)) from e
    started = time.monotonic()
    upgrade(settings.database_url, production=settings.production)
    click.echo(f"database migrated to head ({time.monotonic() - started:.1f}s)")
    if not skip_topics:
        created = asyncio.run(ensure_topics(access, settings.topic_prefix, replication_factor))
        click.echo(f"topics created: {', '.join(created) if created else 'none (all exist)'}")
