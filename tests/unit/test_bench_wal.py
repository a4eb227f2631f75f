"""The e2e bench's WAL breakdown (tools/bench/e2e_wal.py) read from pg_waldump's own lines:
each record counted once under the table its first block belongs to (or "no relation"), full
page images apart, records of other databases left out, and summed by kind of record."""

from __future__ import annotations

from tools.bench.e2e_wal import NO_RELATION, Tally, WalShare, wal_figures

DB, OTHER = "16384", "99999"
NAMES = {"16390": "outbox", "16391": "outbox", "16400": "settlements"}
LINES = [
    "rmgr: Heap        len (rec/tot):    135/   135, tx:     111653, lsn: 15/F85FA018, prev "
    f"15/F85F9FA0, desc: INSERT off 22 flags 0x00, blkref #0: rel 1663/{DB}/16390 blk 14876",
    "rmgr: Btree       len (rec/tot):     72/    72, tx:     111652, lsn: 15/F85FA0A0, prev "
    f"15/F85FA018, desc: INSERT_LEAF off 159, blkref #0: rel 1663/{DB}/16391 blk 6045",
    "rmgr: Heap        len (rec/tot):     54/  4100, tx:     111654, lsn: 15/F85FA0E8, prev "
    f"15/F85FA0A0, desc: LOCK off 3: xid 7: flags 0x00 LOCK_ONLY KEYSHR_LOCK , blkref #0: rel "
    f"1663/{DB}/16400 blk 2 FPW",
    "rmgr: Heap        len (rec/tot):    135/   135, tx:     111655, lsn: 15/F85FA130, prev "
    f"15/F85FA0E8, desc: INSERT off 23 flags 0x00, blkref #0: rel 1663/{OTHER}/16390 blk 1",
    "rmgr: Transaction len (rec/tot):     34/    34, tx:     111653, lsn: 15/F85FA178, prev "
    "15/F85FA130, desc: COMMIT 2026-12-03 04:20:00.000000 UTC",
    "first record is after 15/F85FA000, at 15/F85FA018, skipping over 24 bytes",
]


def tallied() -> Tally:
    tally = Tally(DB, NAMES)
    for line in LINES:
        tally.add(line)
    return tally


def test_records_are_summed_per_table_with_their_images_and_other_databases_left_out() -> None:
    tables = tallied().breakdown().tables
    assert tables == [
        WalShare("settlements", 4100, 4100, 1),
        WalShare("outbox", 207, 0, 2),
        WalShare(NO_RELATION, 34, 0, 1),
    ]


def test_records_are_summed_per_kind() -> None:
    kinds = {k.name: k.total for k in tallied().breakdown().kinds}
    assert kinds == {
        "Heap LOCK": 4100,
        "Heap INSERT": 135,
        "Btree INSERT_LEAF": 72,
        "Transaction COMMIT": 34,
    }


def test_figures_are_per_paid_settlement() -> None:
    figures = {f.name: f.value for f in wal_figures("250/s", tallied().breakdown(), 2)}
    assert figures["250/s wal outbox"] == 103.5
    assert figures["250/s wal full-page images"] == 2050.0
    assert figures["250/s wal records"] == 2.0
    assert figures["250/s wal kind Heap LOCK"] == 2050.0
