-- The relation a user named, resolved with the session's search_path.
-- $1 is the already-quoted name; it is bound, never pasted.
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = pg_catalog.to_regclass($1)
