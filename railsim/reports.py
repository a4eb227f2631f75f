"""Stripe's Reporting API over the simulator's balance: report types, runs, their files.

A report type's data starts at midnight (UTC) of the day the account opened and ends at the
start of the current period of `report_data_interval` seconds on the simulator's clock
(Stripe's end lags the present; the `realistic` habits use an hour). A run is created
`pending`, is checked as Stripe checks it (a known type, an interval inside the data,
known columns, a real time zone) and succeeds `report_run_seconds` later, its result a
`file` whose contents are the report's CSV, served on the files host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from railsim.errors import ApiError
from railsim.objects import Wire, new_id
from railsim.statement import PAYOUT_CATEGORIES, Causes, Line, column_known, render
from services.adapters.stripe.report_types import (
    BALANCE_DEFAULT_COLUMNS,
    BALANCE_REPORT,
    PAYOUTS_DEFAULT_COLUMNS,
    PAYOUTS_REPORT,
)

DAY = 86_400
REPORT_TYPES = {
    BALANCE_REPORT: ("Balance change from activity (itemized)", BALANCE_DEFAULT_COLUMNS),
    PAYOUTS_REPORT: ("Payouts (itemized)", PAYOUTS_DEFAULT_COLUMNS),
}
_SCALARS = frozenset(
    {"interval_start", "interval_end", "currency", "reporting_category", "timezone"}
    | {"payout", "connected_account"}
)
FILE_LIFETIME = 365 * DAY  # how long Stripe keeps a report's file


def data_available(opened: float, now: float, interval: int) -> tuple[int, int]:
    """(data_available_start, data_available_end) of every report type."""
    start = int(opened) // DAY * DAY
    return start, max(start, int(now) // interval * interval)


def report_type_wire(type_id: str, opened: float, now: float, interval: int) -> Wire | None:
    """The `reporting.report_type` object of `type_id`, or None for a type not served."""
    if type_id not in REPORT_TYPES:
        return None
    name, columns = REPORT_TYPES[type_id]
    start, end = data_available(opened, now, interval)
    return {
        "id": type_id,
        "object": "reporting.report_type",
        "data_available_end": end,
        "data_available_start": start,
        "default_columns": list(columns),
        "livemode": False,
        "name": name,
        "updated": end,
        "version": 3,
    }


@dataclass(frozen=True, slots=True)
class RunParameters:
    """What a run reports: the interval [start, end), the columns, and its filters."""

    interval_start: int
    interval_end: int
    columns: tuple[str, ...]
    given: tuple[str, ...]  # the parameters the caller set, echoed back as Stripe does
    currency: str | None = None
    reporting_category: str | None = None
    timezone: str = "Etc/UTC"
    payout: str | None = None
    connected_account: str | None = None

    def echo(self) -> Wire:
        """The run's `parameters` as Stripe shows them."""
        shown: Wire = {"interval_end": self.interval_end, "interval_start": self.interval_start}
        for name in self.given:
            value = getattr(self, name)
            shown[name] = list(value) if isinstance(value, tuple) else value
        return dict(sorted(shown.items()))


@dataclass(slots=True)
class ReportRun:
    """One run of a report type: pending until `due`, then succeeded with its file."""

    id: str
    report_type: str
    created: int
    due: float
    parameters: RunParameters
    status: str = "pending"
    succeeded_at: int | None = None
    file: dict[str, int | str] = field(default_factory=dict)  # id, size, created

    def to_wire(self, files_base: str) -> Wire:
        """The `reporting.report_run` object; its file's `url` is on the files host."""
        return {
            "id": self.id,
            "object": "reporting.report_run",
            "created": self.created,
            "error": None,
            "livemode": False,
            "parameters": self.parameters.echo(),
            "report_type": self.report_type,
            "result": file_wire(self.id, self.file, files_base) if self.file else None,
            "status": self.status,
            "succeeded_at": self.succeeded_at,
        }

    def record(self) -> Wire:
        """The run's journal line."""
        return {"k": "run", "v": dataclasses.asdict(self)}


def run_of(record: Wire) -> ReportRun:
    """The run a journal line holds."""
    state = dict(record["v"])
    params = dict(state.pop("parameters"))
    params["columns"], params["given"] = tuple(params["columns"]), tuple(params["given"])
    return ReportRun(parameters=RunParameters(**params), **state)


def file_wire(run_id: str, file: dict[str, int | str], files_base: str) -> Wire:
    """The `file` object holding a run's result."""
    file_id, created = str(file["id"]), int(file["created"])
    return {
        "id": file_id,
        "object": "file",
        "created": created,
        "expires_at": created + FILE_LIFETIME,
        "filename": f"{file_id}.csv",
        "links": {"object": "list", "data": [], "has_more": False, "url": "/v1/file_links"},
        "purpose": "finance_report_run",
        "size": int(file["size"]),
        "title": f"FinanceReportRun {run_id}",
        "type": "csv",
        "url": f"{files_base}/v1/files/{file_id}/contents",
    }


def new_run(
    pairs: Iterable[tuple[str, str]], now: float, available: tuple[int, int], run_seconds: float
) -> ReportRun:
    """The run `pairs` (the POSTed form) ask for, pending; ApiError as Stripe refuses one."""
    report_type, given, columns = _form(pairs)
    if report_type is None:
        raise ApiError(
            "Missing required param: report_type.", code="parameter_missing", param="report_type"
        )
    if report_type not in REPORT_TYPES:
        raise ApiError(f"Invalid report_type: {report_type}", param="report_type")
    parameters = _parameters(report_type, given, columns, available)
    return ReportRun(new_id("frr"), report_type, int(now), now + run_seconds, parameters)


def _form(pairs: Iterable[tuple[str, str]]) -> tuple[str | None, dict[str, str], list[str]]:
    """report_type, the scalar parameters and the columns (`[]` or `[n]` lists) of a form."""
    report_type, given, columns = None, {}, []
    for key, value in pairs:
        if key == "report_type":
            report_type = value
        elif key.startswith("parameters[columns]["):
            columns.append(value)
        elif key.startswith("parameters[") and key.endswith("]") and key[11:-1] in _SCALARS:
            given[key[11:-1]] = value
        elif key != "expand" and not key.startswith("expand["):
            raise ApiError(
                f"Received unknown parameter: {key}", code="parameter_unknown", param=key
            )
    return report_type, given, columns


def _parameters(
    report_type: str, given: dict[str, str], columns: list[str], available: tuple[int, int]
) -> RunParameters:
    start = _timestamp(given, "interval_start", available[0])
    end = _timestamp(given, "interval_end", available[1])
    if not available[0] <= start < end:
        raise ApiError(
            "interval_start must be on or after data_available_start and before interval_end.",
            param="parameters[interval_start]",
        )
    if end > available[1]:
        raise ApiError(
            f"interval_end must be on or before data_available_end ({available[1]}).",
            param="parameters[interval_end]",
        )
    for column in columns:
        if not column_known(report_type, column):
            raise ApiError(f"Invalid column: {column}", param="parameters[columns]")
    zone = given.get("timezone", "Etc/UTC")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ApiError(f"Invalid timezone: {zone}", param="parameters[timezone]") from None
    chosen = tuple(columns) or REPORT_TYPES[report_type][1]
    named = tuple(sorted(given.keys() - {"interval_start", "interval_end"}))
    optional = {k: given[k].lower() if k == "currency" else given[k] for k in named}
    return RunParameters(
        start, end, chosen, (*named, *(("columns",) if columns else ())), **optional
    )


def _timestamp(given: dict[str, str], name: str, default: int) -> int:
    raw = given.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit():
        raise ApiError(
            f"Invalid integer: {raw}",
            code="parameter_invalid_integer",
            param=f"parameters[{name}]",
        )
    return int(raw)


def report_csv(run: ReportRun, transactions: Iterable[Wire], causes: Causes) -> str:
    """The CSV text of `run` over the rail's balance `transactions` (oldest first)."""
    p = run.parameters
    payouts = run.report_type == PAYOUTS_REPORT
    lines: list[Line] = []
    for txn in transactions:
        if (txn["reporting_category"] in PAYOUT_CATEGORIES) != payouts:
            continue
        if p.currency not in (None, txn["currency"]) or p.reporting_category not in (
            None,
            txn["reporting_category"],
        ):
            continue
        line = causes.line(txn)
        when = line.effective_at if payouts else int(txn["created"])
        if p.interval_start <= when < p.interval_end and _wanted(line, p):
            lines.append(line)
    if payouts:  # automatic payouts take effect on arrival, so out of booking order
        lines.sort(key=lambda line: line.effective_at)
    return render(p.columns, lines, ZoneInfo(p.timezone))


def _wanted(line: Line, p: RunParameters) -> bool:
    if p.payout is not None:
        paid_in = line.payout.id if line.payout else line.automatic_payout
        if paid_in != p.payout:
            return False
    if p.connected_account is not None:
        account = line.transfer.destination if line.transfer else None
        return account == p.connected_account
    return True
