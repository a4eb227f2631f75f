"""The core's Reporting API: report types, report runs that succeed after a while, and the
files holding their results. A file's `url` is on the files host, whose base the caller
names (`files_base`), since it depends on where the simulator is served."""

from __future__ import annotations

from railsim.errors import ApiError
from railsim.guard import Guarded, Pairs
from railsim.objects import Wire, json_bytes, new_id
from railsim.replies import Reply, error_reply
from railsim.reports import ReportRun, data_available, file_wire, new_run, report_type_wire

FILES_BASE = "https://files.stripe.com"  # where a caller that names none would look


class ReportCalls(Guarded):
    """Stripe's report types and runs over the rail's balance transactions."""

    def report_type(self, type_id: str) -> Reply:
        """GET /v1/reporting/report_types/<id>: the type, its data's span, its columns."""

        def found() -> Wire | None:
            interval = self._habits.report_data_interval
            return report_type_wire(type_id, self._state.opened, self.clock.now(), interval)

        return self._one(type_id, f"No such report type: '{type_id}'", found)

    def create_report_run(self, pairs: Pairs, files_base: str = FILES_BASE) -> Reply:
        """POST /v1/reporting/report_runs: a pending run, or Stripe's 400 for a bad one."""
        pairs = list(pairs)
        request_id = new_id("req")
        with self._locked():
            now = self._advance()
            available = data_available(self._state.opened, now, self._habits.report_data_interval)
            try:
                run = new_run(pairs, now, available, self._habits.report_run_seconds)
            except ApiError as e:
                return error_reply(e, request_id)
            self._state.runs.add(run.id, run)
            self._state.waiting_runs.append(run)
            if self._journal.enabled:
                self._journal.note(run.record())
            return Reply(200, json_bytes(run.to_wire(files_base)), request_id, created_id=run.id)

    def retrieve_report_run(self, run_id: str, files_base: str = FILES_BASE) -> Reply:
        """GET /v1/reporting/report_runs/<id>: the run now (succeeded once it is due)."""

        def found() -> Wire | None:
            run = self._run(run_id)
            return None if run is None else run.to_wire(files_base)

        return self._one(run_id, f"No such report run: '{run_id}'", found)

    def list_report_runs(self, pairs: Pairs, files_base: str = FILES_BASE) -> Reply:
        """GET /v1/reporting/report_runs: the runs, newest first, paged."""
        return self._list(
            "/v1/reporting/report_runs",
            frozenset(),
            lambda: self._state.runs,
            pairs,
            lambda run, key: getattr(run, key, None),
            lambda run: run.to_wire(files_base),
        )

    def retrieve_file(self, file_id: str, files_base: str = FILES_BASE) -> Reply:
        """GET /v1/files/<id>: the file object of a run's result, or 404 resource_missing."""

        def found() -> Wire | None:
            for run in self._state.runs.records:
                if run.file.get("id") == file_id:
                    return file_wire(run.id, run.file, files_base)
            return None

        return self._one(file_id, f"No such file upload: '{file_id}'", found)

    def file_contents(self, file_id: str) -> bytes | None:
        """The contents of a run's result file, or None if there is no such file."""
        with self._locked():
            self._advance()
            return self._state.files.get(file_id)

    def _run(self, run_id: str) -> ReportRun | None:
        position = self._state.runs.position.get(run_id)
        return None if position is None else self._state.runs.records[position]
