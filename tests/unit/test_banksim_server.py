"""`settle banksim` on a real port: the bank's headers on the wire, a lost answer that is a
connection really dropped mid-answer (and no traceback in the log for it), or a 504, and the
file taken either way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from banksim.payment_files import Transfer, one_transfer_file
from tests.bank_process import running_bank


@pytest.fixture
def bank_url(tmp_path: Path) -> Iterator[str]:
    with running_bank(tmp_path, "--start-date", "2026-01-05") as url:
        yield url


def test_a_lost_answer_drops_the_connection_or_answers_504_and_the_file_is_taken(
    bank_url: str, tmp_path: Path
) -> None:
    with httpx.Client(base_url=bank_url) as client:
        health = client.get("/healthz")
        assert health.headers["x-bank-business-date"] == "2026-01-05"
        assert health.headers["x-bank-time"].startswith("2026-01-05T")

        client.post("/_control/faults", json={"lost_answer": 1, "lost_answer_dropped": 1})
        with pytest.raises(httpx.RemoteProtocolError):
            client.post("/v1/files", content=one_transfer_file("MSG-DROP", Transfer("E2E-DROP")))
        client.post("/_control/faults", json={"lost_answer_dropped": 0})
        timed_out = client.post("/v1/files", content=one_transfer_file("MSG-504", Transfer("E-5")))
        assert timed_out.status_code == 504
        client.post("/_control/faults", json={"profile": "none"})

        files = client.get("/v1/files").json()["files"]
        assert [f["msg_id"] for f in files] == ["MSG-DROP", "MSG-504"]
        assert client.get("/v1/effects").json()["debits"] == {"E2E-DROP": 1, "E-5": 1}
        assert "banksim_transfers_debited 2.0" in client.get("/metrics").text
    assert "Traceback" not in (tmp_path / "banksim.log").read_text()
