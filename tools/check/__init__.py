"""`settle check`: the read-only invariant checker over PostgreSQL, Kafka and the rail."""
