"""Each outside system behind one package: PostgreSQL, Kafka, and one package per rail.
Adapters never import each other; they import the platform and the floors below it."""
