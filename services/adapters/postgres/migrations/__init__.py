"""Alembic migrations of settle's PostgreSQL schema; `settle migrate` runs them to head."""
