"""The rail simulator: a stateful fake of the part of Stripe's API that settle's adapter uses.

core.RailSim        the state machine (objects, idempotency, effects, faults, reports)
habits, activity    the account's own habits: charges, fees, automatic payouts, transit
reports, statement  Stripe's Reporting API and the CSV of its itemized reports
journal, replay     the state kept on disk across restarts (`--data-dir`)
fake_rail.SimRail   the core as an in-process `Rail`, for tests and the demo
http.create_app     Stripe's wire format over the core, plus the /_sim control endpoints
webhooks            Stripe-signed event delivery with retries
cli.railsim         `settle railsim`
"""
