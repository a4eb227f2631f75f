-- The service role: what settle's services do to the database, and nothing more.
--
-- The role that owns the schema (the one `settle migrate` connects as) runs this after every
-- migration, naming the role the services connect as:
--   psql "$OWNER_URL" -v ON_ERROR_STOP=1 -v service_role=settle_app -f service_role.sql
-- The role itself is made once by whoever administers the server:
--   CREATE ROLE settle_app LOGIN PASSWORD '...';
-- Production mode refuses to start a service connected as the owner (or a superuser).
--
-- Rows only: no DDL, no TRUNCATE, REFERENCES or TRIGGER, so the role can neither change the
-- schema nor disable a trigger; on the append-only tables (those guarded by
-- settle_append_only) it may only read and add rows. Idempotent: it first takes back every
-- table privilege it grants, so a table that became append-only loses UPDATE and DELETE.

SELECT format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), :'service_role') \gexec

SELECT format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', current_schema(), :'service_role')
\gexec

-- Partitions are reached through their parent, whose privileges PostgreSQL checks.
SELECT format('GRANT SELECT, INSERT%s ON %I TO %I',
              CASE WHEN EXISTS (SELECT 1 FROM pg_trigger t
                                 WHERE t.tgrelid = c.oid
                                   AND t.tgfoid = 'settle_append_only'::regproc)
                   THEN '' ELSE ', UPDATE, DELETE' END,
              c.relname, :'service_role')
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p') AND NOT c.relispartition
\gexec

SELECT format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO %I',
              current_schema(), :'service_role') \gexec

-- The reconciler keeps the history's months ahead (shared.history_months): the partitions
-- are the owner's tables, so that one function runs with the owner's rights, on this
-- schema only; the function it calls to make any one partition stays the owner's.
SELECT format('ALTER FUNCTION settle_ensure_month_partitions(integer) SECURITY DEFINER '
              'SET search_path = %I, pg_temp', current_schema()) \gexec
REVOKE EXECUTE ON FUNCTION settle_month_partition(text, timestamp) FROM PUBLIC;
