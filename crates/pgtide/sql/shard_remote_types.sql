-- Columns of the remote table $1 (quoted, schema-qualified): name, its
-- type's schema and name, typmod, and the type as SQL spells it. On the
-- shard, to compare with the coordinator's (shard/remote_check.rs).
SELECT a.attname::text, n.nspname::text, t.typname::text, a.atttypmod,
       pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
