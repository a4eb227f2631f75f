"""Reconciliation: the ledger compared with the rail's objects and balance, breaks reported."""
