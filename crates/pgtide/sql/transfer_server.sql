-- What `pgtide copy` compares between its two servers: the major version
-- (binary formats are trusted within one), the server encoding, and an
-- identity (postmaster start time, database) that tells whether both
-- connections reach the same database. No part of it may depend on the
-- session's settings: a start time shown as text follows TimeZone and
-- DateStyle, and two connections to one database with other settings
-- passed for two (outside testing: a table copied onto itself, rows
-- twice). So: microseconds since the epoch, the server's port (two
-- servers started in the same microsecond on one host, as tests start
-- them, differ there; every way of reaching one server shows its own),
-- and the database's OID.
SELECT pg_catalog.current_setting('server_version'),
       pg_catalog.current_setting('server_version_num')::int / 10000,
       pg_catalog.current_setting('server_encoding'),
       (extract(epoch FROM pg_catalog.pg_postmaster_start_time()) * 1000000)::bigint::text
           || ' ' || pg_catalog.current_setting('port')
           || ' ' || (SELECT d.oid FROM pg_catalog.pg_database d
                      WHERE d.datname = pg_catalog.current_database())::text
