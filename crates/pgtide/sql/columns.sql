-- Columns of a relation in table order, with what COPY and the binary
-- encoder need to know. attgenerated exists since PG 12.
SELECT a.attname::text,
       a.atttypid,
       a.atttypmod,
       a.attnotnull,
       a.atthasdef,
       a.attgenerated::text <> '',
       pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
