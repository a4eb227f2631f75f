"""The bank simulator: a SEPA bank's host-to-host file API, for local runs, tests and chaos."""
