"""Stripe's two report types that stand for a statement of the account, as its Reporting API
names them: their ids, their default columns in Stripe's order, and the columns settle asks
for besides (the connected account, and the settlement a transfer or its reversal carries).
The simulator renders them, `settle rail statement` asks for them, reconciliation reads them.
"""

from __future__ import annotations

BALANCE_REPORT = "balance_change_from_activity.itemized.3"  # every balance change but payouts
PAYOUTS_REPORT = "payouts.itemized.3"  # the payouts, and the money a failed one brought back
SETTLEMENT_COLUMN = "transfer_metadata[settlement_id]"  # only there when asked for
BALANCE_DEFAULT_COLUMNS = (
    "balance_transaction_id",
    "created_utc",
    "created",
    "available_on_utc",
    "available_on",
    "currency",
    "gross",
    "fee",
    "net",
    "reporting_category",
    "source_id",
    "description",
    "customer_facing_amount",
    "customer_facing_currency",
)
PAYOUTS_DEFAULT_COLUMNS = (
    "payout_id",
    "effective_at_utc",
    "effective_at",
    "currency",
    "gross",
    "fee",
    "net",
    "reporting_category",
    "description",
    "payout_expected_arrival_date",
    "payout_status",
    "payout_reversed_at_utc",
    "payout_reversed_at",
    "payout_type",
    "payout_description",
    "payout_destination_id",
)
# What settle asks of the balance report: its defaults, the connected account a transfer went
# to, and the settlement each transfer line (and each of its reversals) carries.
BALANCE_COLUMNS_ASKED = (*BALANCE_DEFAULT_COLUMNS, "connected_account_id", SETTLEMENT_COLUMN)
