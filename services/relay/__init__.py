"""The relay: drains the outbox to Kafka and dispatches rail instructions, never paying twice."""
