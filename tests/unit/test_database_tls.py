"""The database URL's TLS parameters reach asyncpg on every path that connects: the services'
pools and the migrations (whose SQLAlchemy engine would otherwise drop `sslmode`)."""

from __future__ import annotations

from typing import Any, NoReturn

import asyncpg
import pytest

from services.adapters.postgres.database import create_pool
from services.adapters.postgres.migrate import migration_engine
from services.platform.settings import load_settings

URL = "postgresql+asyncpg://app@db.internal:5432/settle?sslmode=verify-full&sslrootcert=/ca.pem"
DSN = "postgresql://app@db.internal:5432/settle?sslmode=verify-full&sslrootcert=/ca.pem"


class Stop(Exception):
    """Raised by the fake connect once it has seen its arguments."""


async def test_the_pool_hands_asyncpg_the_urls_sslmode(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    async def fake_create_pool(dsn: str, **_: Any) -> object:
        seen.append(dsn)
        return object()

    monkeypatch.setattr(asyncpg, "create_pool", fake_create_pool)
    await create_pool(load_settings({"SETTLE_DATABASE_URL": URL}))
    assert seen == [DSN]


async def test_migrations_hand_asyncpg_the_urls_sslmode(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def fake_connect(*args: Any, **kwargs: Any) -> NoReturn:
        seen.append((args, kwargs))
        raise Stop

    monkeypatch.setattr(asyncpg, "connect", fake_connect)
    engine = migration_engine(URL)
    with pytest.raises(Stop):
        async with engine.connect():
            pass
    await engine.dispose()
    assert seen == [((DSN,), {})]
