-- What `pgtide copy` compares between its two servers: the major version
-- (binary formats are trusted within one), the server encoding, and an
-- identity (postmaster start time, database) that tells whether both
-- connections reach the same database. No part of it may depend on the
-- session's settings: a start time shown as text follows TimeZone and
-- DateStyle, and two connections to one database with other settings
-- passed for two (outside testing: a table copied onto itself, rows
-- twice). So: microseconds since the epoch, and the database's OID.
SELECT pg_catalog.current_setting('server_version'),
       pg_catalog.current_setting('server_version_num')::int / 10000,
       pg_catalog.current_setting('server_encoding'),
       (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) * 1000000)::bigint::text
           || ' ' || (SELECT d.oid FROM pg_catalog.pg_database d
                      WHERE d.datname = pg_catalog.current_database())::text
