-- TLS for deploy/compose.yaml's server: run once when the data directory is first made,
-- taking effect at the start the image makes right after. The key and certificate are one
-- PEM file (settle infra kafka-tls deploy/postgres/tls --name postgres), owned by the
-- postgres user; clients verify it against deploy/postgres/tls/ca.pem (sslmode=verify-full).
ALTER SYSTEM SET ssl = on;
ALTER SYSTEM SET ssl_cert_file = '/etc/postgresql/tls/server.pem';
ALTER SYSTEM SET ssl_key_file = '/etc/postgresql/tls/server.pem';
ALTER SYSTEM SET ssl_min_protocol_version = 'TLSv1.2';
