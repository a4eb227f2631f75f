"""The Reporting API, charges and the files host over HTTP.

Stripe serves a report's file from a host of its own (`files.stripe.com`), which the
`stripe` library reaches through its `files` base address. The simulator serves it either
on a port of its own (`--files-port`: the files host is `http://HOST:PORT`) or, without
one, under the base path `/files` of the API's own address (the files host is
`http://HOST:API_PORT/files`); a run's result names the full URL either way, so a client
can take the files base from it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from railsim.core import RailSim
from railsim.creates import CreateCalls, answer_headers
from railsim.errors import ApiError
from railsim.replies import Reply, error_reply

Endpoint = Callable[[Request], Awaitable[Response]]
FILES_PATH = "/files"  # the files host's base path on the API's own address
CONTENTS = "/v1/files/{file_id}/contents"


def respond(reply: Reply) -> Response:
    """A Stripe JSON answer with Stripe's headers."""
    headers = answer_headers(reply, None)
    return Response(reply.body, reply.status, headers, media_type="application/json")


class ReportingApi:
    """Charges, report types and runs, file objects; and file contents on the files host."""

    def __init__(self, calls: CreateCalls, files_port: int | None) -> None:
        self.calls = calls
        self.sim: RailSim = calls.sim
        self.files_port = files_port

    def routes(self) -> list[BaseRoute]:
        """The routes on the API's address (the files host's path among them, when it has
        no port of its own)."""
        routes: list[BaseRoute] = [
            Route("/v1/charges", self._guarded(self._charges), methods=["GET"]),
            Route("/v1/charges/{charge_id}", self._guarded(self._charge), methods=["GET"]),
            Route(
                "/v1/reporting/report_types/{type_id}",
                self._guarded(self._report_type),
                methods=["GET"],
            ),
            Route(
                "/v1/reporting/report_runs",
                self._guarded(self._report_runs),
                methods=["GET", "POST"],
            ),
            Route(
                "/v1/reporting/report_runs/{run_id}",
                self._guarded(self._report_run),
                methods=["GET"],
            ),
            Route("/v1/files/{file_id}", self._guarded(self._file), methods=["GET"]),
        ]
        if self.files_port is None:
            routes.append(Route(FILES_PATH + CONTENTS, self._contents, methods=["GET"]))
        return routes

    def files_app(self) -> Starlette:
        """The files host on a port of its own: file contents, and Stripe's 404 for the rest."""

        async def unknown(request: Request) -> Response:
            missing = ApiError(f"Unrecognized request URL (GET: {request.url.path}).", status=404)
            return respond(error_reply(missing, "req_unrouted"))

        return Starlette(
            routes=[
                Route(CONTENTS, self._contents, methods=["GET"]),
                Route("/{rest:path}", unknown, methods=["GET", "POST", "DELETE"]),
            ]
        )

    def files_base(self, request: Request) -> str:
        """The files host's base address, as the caller reached the simulator."""
        if self.files_port is None:
            return str(request.base_url).rstrip("/") + FILES_PATH
        return f"{request.url.scheme}://{request.url.hostname}:{self.files_port}"

    def _guarded(self, endpoint: Endpoint) -> Endpoint:
        async def admitted(request: Request) -> Response:
            denied = await self.calls.admit(request.headers.get("Authorization", ""))
            return respond(denied) if denied is not None else await endpoint(request)

        return admitted

    async def _charges(self, request: Request) -> Response:
        query = parse_qsl(request.url.query, keep_blank_values=True)
        return respond(self.sim.list_charges(query))

    async def _charge(self, request: Request) -> Response:
        return respond(self.sim.retrieve_charge(request.path_params["charge_id"]))

    async def _report_type(self, request: Request) -> Response:
        return respond(self.sim.report_type(request.path_params["type_id"]))

    async def _report_runs(self, request: Request) -> Response:
        base = self.files_base(request)
        if request.method == "GET":
            query = parse_qsl(request.url.query, keep_blank_values=True)
            return respond(self.sim.list_report_runs(query, base))
        try:
            form = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        except UnicodeDecodeError:
            bad = ApiError("The request body is not valid UTF-8.", code="parameter_invalid_string")
            return respond(error_reply(bad, "req_undecodable"))
        return respond(self.sim.create_report_run(form, base))

    async def _report_run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        return respond(self.sim.retrieve_report_run(run_id, self.files_base(request)))

    async def _file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        return respond(self.sim.retrieve_file(file_id, self.files_base(request)))

    async def _contents(self, request: Request) -> Response:
        """A report's file, as CSV (authenticated, as files.stripe.com is)."""
        denied = await self.calls.admit(request.headers.get("Authorization", ""))
        if denied is not None:
            return respond(denied)
        file_id = request.path_params["file_id"]
        contents = self.sim.file_contents(file_id)
        if contents is None:
            missing = ApiError(
                f"No such file upload: '{file_id}'", status=404, code="resource_missing"
            )
            return respond(error_reply(missing, "req_file"))
        return Response(contents, media_type="text/csv")
