"""The rail simulator: a stateful fake of the part of Stripe's API that settle's adapter uses.

core.RailSim        the state machine (objects, idempotency, effects, faults); no I/O
fake_rail.SimRail   the core as an in-process `Rail`, for tests and the demo
http.create_app     Stripe's wire format over the core, plus the /_sim control endpoints
webhooks            Stripe-signed event delivery with retries
cli.railsim         `settle railsim`
"""
