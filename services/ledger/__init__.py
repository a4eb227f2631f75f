"""The ledger service: settlement intake over HTTP and Kafka, double-entry books, outbox."""
