"""Kafka: how clients reach the brokers, the clients themselves, topic creation, poison."""
