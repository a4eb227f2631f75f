"""The admin port's readiness probe: whether PostgreSQL and Kafka answer (/healthz and
/metrics are the shared listeners')."""

from __future__ import annotations

import json

from fastapi import APIRouter, Response

from services.ledger.readiness import ReadinessProbe
from services.platform.edge import JSON


def readiness_routes(readiness: ReadinessProbe) -> APIRouter:
    """GET /readyz: each dependency by name, 503 when one did not answer."""
    router = APIRouter(tags=["operations"])

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
