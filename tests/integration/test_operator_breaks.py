"""Operators handle reconciliation breaks on the real PostgreSQL: bulk resolution with a mix
of good and refused ids (each its own audited action, a summary of both), the export of many
open breaks streamed in bounded memory as well-formed CSV and JSON lines, and the HTTP routes
behind operator tokens."""

from __future__ import annotations

import csv
import io
import json
import tracemalloc
from pathlib import Path

import httpx
import pytest

from services.operations.export import ExportFormat, export_open
from services.operations.http import routes
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    made_at_rail,
    operator_app,
    plant_breaks,
    rail,
    referred,
    settle_as_operator,
    snapshot,
    world,
)

pytestmark = pytest.mark.integration
__all__ = ["rail", "template", "world"]
OPERATOR, TENANT = "ops-token-1", "tenant-token-1"


async def settle(world: World, *args: str) -> tuple[int, str]:
    return await settle_as_operator(world, *args)


async def statuses(world: World, ids: list[int]) -> list[str]:
    rows = await world.pool.fetch(
        "SELECT status FROM reconciliation_breaks WHERE id = ANY($1::bigint[]) ORDER BY id", ids
    )
    return [r["status"] for r in rows]


async def audited(world: World, ids: list[int]) -> list[str]:
    rows = await world.pool.fetch(
        "SELECT target, actor FROM operator_actions WHERE target = ANY($1::text[]) ORDER BY id",
        [f"break:{i}" for i in ids],
    )
    return [f"{r['target']} {r['actor']}" for r in rows]


async def test_bulk_from_file_resolves_the_good_ids_and_reports_the_refused(
    world: World, tmp_path: Path
) -> None:
    good = await plant_breaks(world.pool, 2)
    healed = await plant_breaks(world.pool, 1, "status_drift", status="healed")
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{good[0]}\n{healed[0]}\n\n999999999\nnot-an-id\n{good[1]}\n")
    status, out = await settle(
        world,
        "breaks",
        "resolve",
        "--from-file",
        str(ids),
        "--reason",
        "booked by hand",
        "--operator",
        "carol",
    )
    assert status == 1, out
    summary = json.loads(out)
    assert (summary["done"], summary["refused"]) == (2, 3)
    assert [(i["id"], i["done"], i["code"]) for i in summary["items"]] == [
        (str(good[0]), True, None),
        (str(healed[0]), False, "break_closed"),
        ("999999999", False, "not_found"),
        ("not-an-id", False, "not_found"),
        (str(good[1]), True, None),
    ]
    assert await statuses(world, [*good, *healed]) == ["resolved", "resolved", "healed"]
    assert await audited(world, [*good, *healed]) == [f"break:{i} carol" for i in good]


async def test_bulk_of_one_type_resolves_only_the_open_breaks_of_it(world: World) -> None:
    amounts = await plant_breaks(world.pool, 3)
    currencies = await plant_breaks(world.pool, 2, "currency_mismatch")
    status, out = await settle(
        world,
        "breaks",
        "resolve",
        "--all-of-type",
        "amount_mismatch",
        "--reason",
        "fee",
        "--operator",
        "dave",
    )
    assert status == 0, out
    assert (json.loads(out)["done"], json.loads(out)["refused"]) == (3, 0)
    assert await statuses(world, amounts + currencies) == ["resolved"] * 3 + ["open"] * 2
    assert len(await audited(world, amounts + currencies)) == 3


async def test_the_export_of_many_open_breaks_streams_in_bounded_memory(world: World) -> None:
    count = 20_000
    planted = await plant_breaks(world.pool, count)
    await plant_breaks(world.pool, 5, status="resolved")  # closed: not exported
    for fmt in ExportFormat:
        lines, longest = 0, 0
        tracemalloc.start()
        try:
            async with world.pool.acquire() as conn:
                async for line in export_open(conn, fmt, prefetch=100):
                    lines += 1
                    longest = max(longest, len(line))
                    if lines == 2:
                        first = line
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # All 20,000 rows held at once take well over 10 MB; a cursor's batch of 100, not 1.
        assert peak < 2_000_000, (fmt, peak)
        if fmt is ExportFormat.CSV:
            assert lines == count + 1
            (row,) = csv.DictReader(io.StringIO(f"{_CSV_HEADER}{first}"))
            assert (row["id"], row["reason"], row["expected"], row["actual"]) == (
                str(planted[0]),
                "amount:-200",
                "700",
                "500",
            )
        else:
            assert lines == count
            document = json.loads(first)
            assert document["reason"] == "amount:-200" and document["status"] == "open"
            assert (document["expected"], document["actual"]) == (700, 500)


async def test_csv_and_jsonl_exports_are_well_formed(world: World) -> None:
    await plant_breaks(world.pool, 3, "destination_mismatch")
    status, out = await settle(world, "breaks", "export", "--format", "csv")
    assert status == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 3 and {r["type"] for r in rows} == {"destination_mismatch"}
    status, out = await settle(world, "breaks", "export", "--format", "jsonl")
    assert status == 0
    assert [json.loads(line)["type"] for line in out.splitlines()] == ["destination_mismatch"] * 3


_CSV_HEADER = (
    "id,type,settlement_id,rail_object_id,field,currency,expected,actual,reason,first_seen,"
    "last_seen\n"
)


def client_of(world: World, rail: StripeLookup) -> httpx.AsyncClient:
    app = operator_app(
        routes(world.pool, rail, BearerAuth({OPERATOR: "erin"}), BearerAuth({TENANT: "acme"}))
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://ops")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/review"),
        ("GET", "/v1/breaks"),
        ("GET", "/v1/breaks/export"),
        ("POST", "/v1/breaks/1/resolve"),
        ("POST", "/v1/review/x/resolve"),
    ],
)
async def test_http_needs_an_operator_token(
    world: World, rail: StripeLookup, method: str, path: str
) -> None:
    async with client_of(world, rail) as client:
        anonymous = await client.request(method, path)
        tenant = await client.request(method, path, headers={"Authorization": f"Bearer {TENANT}"})
        unknown = await client.request(method, path, headers={"Authorization": "Bearer nope"})
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert anonymous.json()["error"]["code"] == "unauthorized"
    assert (tenant.status_code, tenant.json()["error"]["code"]) == (403, "forbidden")
    assert unknown.status_code == 401


async def test_http_resolves_audited_and_refuses_with_status_and_code(
    world: World, rail: StripeLookup
) -> None:
    (open_break,) = await plant_breaks(world.pool, 1)
    sid = await referred(world)
    await made_at_rail(world, sid)
    auth = {"Authorization": f"Bearer {OPERATOR}"}
    async with client_of(world, rail) as client:
        listed = await client.get("/v1/breaks", params={"status": "open"}, headers=auth)
        done = await client.post(
            f"/v1/breaks/{open_break}/resolve", headers=auth, json={"reason": "written off"}
        )
        again = await client.post(
            f"/v1/breaks/{open_break}/resolve", headers=auth, json={"reason": "twice"}
        )
        no_reason = await client.post(f"/v1/breaks/{open_break}/resolve", headers=auth, json={})
        review = await client.get(f"/v1/review/{sid}", headers=auth)
        refused = await client.post(
            f"/v1/review/{sid}/resolve",
            headers=auth,
            json={"as": "failed", "reason": "nothing sent"},
        )
        missing = await client.get("/v1/breaks/999999999", headers=auth)
        exported = await client.get("/v1/breaks/export", params={"format": "csv"}, headers=auth)
    assert [b["id"] for b in listed.json()["data"]] == [open_break]
    assert done.status_code == 200 and done.json()["resolved_by"] == "erin"
    assert (again.status_code, again.json()["error"]["code"]) == (409, "break_closed")
    assert (no_reason.status_code, no_reason.json()["error"]["code"]) == (400, "reason_required")
    assert review.json()["status"] == "needs_review"
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "rail_disagrees")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    assert await audited(world, [open_break]) == [f"break:{open_break} erin"]
    # Resolved now: the export of open breaks is its header alone.
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    assert exported.text == _CSV_HEADER
    assert (await snapshot(world, sid))["actions"] == []
