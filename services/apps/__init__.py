"""The composition roots: each builds one service from its settings, mounts its routes and
runs its loops (ledger, relay, inbox, reconciler, console), and the commands that start them."""
