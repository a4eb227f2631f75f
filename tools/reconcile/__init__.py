"""`settle reconcile`: one reconciliation run of the ledger against the rail, recorded."""
