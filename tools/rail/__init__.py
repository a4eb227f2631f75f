"""`settle rail`: what the rail says, fetched for reconciliation."""
