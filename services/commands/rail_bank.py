"""What the SEPA rail's bank holds, saved byte for byte: the payment files it received
(`settle rail files --rail sepa --out DIR`) and the camt.053 statements it issued (`settle
rail statement --rail sepa [--date D] --out DIR|FILE`). Each file is written beside its name
and renamed onto it once whole."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

from services.adapters.sepa.bank import Bank

BANK_SECONDS = 60.0


async def fetch_files(url: str) -> list[tuple[str, bytes]]:
    """Every pain.001 the bank received, as uploaded, named <MsgId>.xml."""
    bank = Bank(url, timeout=BANK_SECONDS)
    found = []
    try:
        async for item in bank.listed("files"):
            found.append((f"{item['msg_id']}.xml", await bank.file(str(item["file_id"]))))
    finally:
        await bank.aclose()
    return found


async def fetch_statements(url: str, day: date | None) -> list[tuple[str, bytes]]:
    """The camt.053 statements the bank issued (of business day `day` only, if given), each
    named <day>-<MsgId>.xml."""
    bank = Bank(url, timeout=BANK_SECONDS)
    found = []
    try:
        async for item in bank.listed("reports", kind="camt.053"):
            if day is None or item.get("business_date") == day.isoformat():
                name = f"{item['business_date']}-{item['msg_id']}.xml"
                found.append((name, await bank.report(str(item["report_id"]))))
    finally:
        await bank.aclose()
    return found


def save(out: Path, found: list[tuple[str, bytes]], *, one_file: bool) -> list[Path]:
    """Write `found` into the directory `out`, or its one item to the file `out`."""
    if one_file:
        return [_write(out, data) for _, data in found[:1]]
    out.mkdir(parents=True, exist_ok=True)
    return [_write(out / name, data) for name, data in found]


def _write(path: Path, data: bytes) -> Path:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path
