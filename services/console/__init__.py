"""The operator console: server-rendered pages over the settlements, the review queue, the
breaks, the webhooks and the audit trail, with the operator actions the CLI has."""
