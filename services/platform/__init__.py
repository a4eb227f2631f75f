"""What every service runs on: settings and production refusals, tokens, logs, traces,
metrics, backoff, group commit, the HTTP edge and client. Imports contracts and the domain."""
