"""PostgreSQL: the connection pool, migrations, driver errors sorted, history months."""
