"""How the approvals page shows a proposal's age and where its item is."""

from __future__ import annotations

from datetime import timedelta

from services.console.pages.approvals import age_text, target_link


def test_age_reads_in_seconds_minutes_then_hours() -> None:
    assert age_text(timedelta(seconds=42)) == "42s"
    assert age_text(timedelta(minutes=5, seconds=59)) == "5m"
    assert age_text(timedelta(hours=26, minutes=3)) == "26h 3m"
    assert age_text(timedelta(seconds=-3)) == "0s"  # a clock a little behind the proposer's


def test_each_target_links_to_where_its_item_is_shown() -> None:
    sid = "0b0f4c8e-4a8e-4d35-9a4e-3f3a1c9d2b11"
    assert target_link(f"settlement:{sid}", None) == f"/settlements/{sid}"
    assert target_link("break:12", None) == "/breaks?status=&after=11"
    parked = {"status": "parked", "settlement_id": None}
    assert target_link("inbox:7", parked) == "/webhooks?status=parked&after=6"
    replayed = {"status": "applied", "settlement_id": sid}
    assert target_link("inbox:7", replayed) == f"/settlements/{sid}"
    assert target_link("inbox:7", None) is None
