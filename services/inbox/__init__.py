"""The inbox: the rail's webhooks stored under the rail's event id first, then applied to
settlements as guarded transitions with their postings and outbox events."""
