"""The operator commands' client of the operator API, as `kubectl` is its server's: each request
carries the operator's own token (SETTLE_OPERATOR_TOKEN) and the name the operator acts as
(`Settle-Operator`), to the address SETTLE_OPERATOR_API names. The server holds the
database, the rail's key and the policy, and decides; the command prints its answer.

An answer in the API's error shape is raised as `Answered`, carrying the server's status and
code, so the command exits as it would have had it acted itself: 404 ends with exit status 3,
502-504 with 2, any other refusal with 1. A server that cannot be reached is
`ApiUnreachable` (exit status 2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from services.domain.errors import ApiError, ConfigError
from services.operations.errors import OperationsError
from services.operations.operator_proof import OPERATOR_HEADER
from services.platform.service_settings import OperatorCommandSettings
from services.platform.settings import is_loopback

TIMEOUT_SECONDS = 60.0  # an approval asks the rail while the request waits


class Answered(OperationsError):
    """The operator API refused the request: its status, code and message, as it answered."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message, code=code)
        self.status = status


class ApiUnreachable(ApiError):
    """The operator API did not answer; nothing was done (or it is not known what was)."""

    status = 503
    code = "operator_api_unreachable"


def segment(value: str) -> str:
    """`value` as one path segment: an id an operator typed never adds a path of its own."""
    return quote(value, safe="")


class OperatorApi:
    """Requests to the operator API as one operator; each answer's JSON document."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET `path` with `params` (None values left out); the answer's document."""
        kept = {k: v for k, v in (params or {}).items() if v is not None}
        return (await self._send("GET", path, params=kept)).json()

    async def post(self, path: str, body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """POST `body` to `path`; the answer's status (200 done, 202 proposed) and document."""
        answer = await self._send("POST", path, json=dict(body or {}))
        return answer.status_code, answer.json()

    async def text(self, path: str, params: Mapping[str, Any]) -> AsyncIterator[str]:
        """GET `path` streamed: its text as the server sends it, unchanged."""
        kept = {k: v for k, v in params.items() if v is not None}
        try:
            async with self._client.stream("GET", path, params=kept) as answer:
                if answer.status_code >= 400:
                    await answer.aread()
                    raise _refusal(answer)
                async for text in answer.aiter_text():
                    yield text
        except httpx.HTTPError as e:
            raise _unreachable(e) from e

    async def _send(self, method: str, path: str, **given: Any) -> httpx.Response:
        try:
            answer = await self._client.request(method, path, **given)
        except httpx.HTTPError as e:
            raise _unreachable(e) from e
        if answer.status_code >= 400:
            raise _refusal(answer)
        return answer


@asynccontextmanager
async def operator_api(
    settings: OperatorCommandSettings, operator: str | None = None
) -> AsyncIterator[OperatorApi]:
    """A client of the operator API the settings name, acting as `operator` (None: as the
    token's own operator); ConfigError for a plain-http address beyond this machine, where
    the token would cross the network in clear."""
    base = settings.operator_api
    if base.startswith("http://") and not is_loopback(urlsplit(base).hostname or ""):
        raise ConfigError(
            "SETTLE_OPERATOR_API",
            "is plain http:// to another machine; the operator's token would cross the network "
            "in clear: use the API's https:// address",
        )
    token = settings.operator_token.get_secret_value().strip()
    if not token:
        raise ConfigError("SETTLE_OPERATOR_TOKEN", "is empty: set it to your own operator token")
    headers = {"Authorization": f"Bearer {token}"}
    if operator is not None:
        headers[OPERATOR_HEADER] = operator
    verify: str | bool = settings.operator_ca or True
    async with httpx.AsyncClient(
        base_url=base, headers=headers, verify=verify, timeout=TIMEOUT_SECONDS
    ) as client:
        yield OperatorApi(client)


def _refusal(answer: httpx.Response) -> ApiError:
    try:
        error = answer.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "unexpected_answer", f"HTTP {answer.status_code}: {answer.text[:200]}"
    if answer.status_code in (502, 503, 504):
        return ApiUnreachable(message, code=code)
    return Answered(answer.status_code, code, message)


def _unreachable(error: httpx.HTTPError) -> ApiUnreachable:
    return ApiUnreachable(f"the operator API does not answer: {error}")
