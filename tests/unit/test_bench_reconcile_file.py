"""The `reconcile-file` bench's report files are what `settle reconcile --statement` reads: each
report known by its header, every line read, the planted transfers among them and a charge
every thousand lines counted, not compared."""

from __future__ import annotations

from pathlib import Path

from services.domain.reconciliation import RailObject
from services.reconcile.statement import ReportKind
from services.reconcile.statement_source import StatementSource
from tools.bench.reconcile_file import CHARGE_EVERY, write_files
from tools.bench.reconcile_seed import PLANTED, settlement_id

COUNT = 3000
END = 1_764_144_000  # 2025-11-26 08:00:00 UTC


def test_the_bench_writes_both_reports_and_the_reader_reads_every_line(tmp_path: Path) -> None:
    balance, payouts, lines, charged = write_files(tmp_path, COUNT, END, 600)
    source = StatementSource.open([balance, payouts])
    assert [f.kind for f in source.files] == [ReportKind.BALANCE, ReportKind.PAYOUTS]
    start, end = source.window().seconds()
    objects = {o.object_id: o for _, o in source.objects(start, end)}
    assert source.lines == lines
    # every settlement's transfer but the missing, the duplicates, the strays, the foreign
    assert len(objects) == COUNT - PLANTED + 3 * PLANTED
    assert source.out_of_scope == {"charge": charged} and charged == len(objects) // CHARGE_EVERY
    paid = objects["tr_bench0000000000000100"]
    assert isinstance(paid, RailObject) and paid.settlement_id == settlement_id(100)
    assert end - start <= 601
