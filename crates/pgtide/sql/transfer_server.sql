-- What `pgtide copy` compares between its two servers: the major version
-- (binary formats are trusted within one), the server encoding, and an
-- identity (postmaster start time, database) that tells whether both
-- connections reach the same database.
SELECT pg_catalog.current_setting('server_version'),
       pg_catalog.current_setting('server_version_num')::int / 10000,
       pg_catalog.current_setting('server_encoding'),
       pg_catalog.pg_postmaster_start_time()::text || ' ' || pg_catalog.current_database()
