-- The image runs this in POSTGRES_DB (settle) when it first makes the data directory; the
-- server preloads the library (compose.yaml), so the view answers from the start.
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
