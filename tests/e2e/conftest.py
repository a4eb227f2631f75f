"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.conftest import scratch_database
from tests.harness import Servers


@pytest.fixture
async def database(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_relay_") as url:
        yield url
