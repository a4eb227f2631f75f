"""Local infrastructure without Docker: a PostgreSQL cluster and a KRaft Kafka broker of our own."""
