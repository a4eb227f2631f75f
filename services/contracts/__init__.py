"""What settle and its neighbours agree on: Avro schemas and codecs, topics, partitioning,
command signatures. Imports only the domain."""
