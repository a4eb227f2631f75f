#!/bin/sh
# The role deploy/compose.yaml's services connect as, made once when the data directory is
# first made (the image's docker-entrypoint-initdb.d). It owns nothing: service_role.sql,
# run after every migration, grants it rows only. The password comes from the environment,
# and psql quotes it (:'password'), so no character of it can change the statement.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v password="$SETTLE_APP_PASSWORD" <<'SQL'
CREATE ROLE settle_app LOGIN PASSWORD :'password';
SQL
