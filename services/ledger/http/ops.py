"""Operational endpoints: liveness and readiness of PostgreSQL and Kafka (/metrics is shared)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Response

from services.ledger.readiness import ReadinessProbe
from services.shared.edge import JSON


def ops_routes(readiness: ReadinessProbe) -> APIRouter:
    """/healthz and /readyz."""
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    @router.get(
        "/readyz",
        summary="PostgreSQL and Kafka answer",
        responses={503: {"description": "Some component did not answer in time."}},
    )
    async def readyz() -> Response:
        components = await readiness.check()
        status = 200 if all(components.values()) else 503
        return Response(json.dumps(components, sort_keys=True), status, media_type=JSON)

    return router
