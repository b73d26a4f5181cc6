-- The partitions of $1: oid, schema, name, relkind, the bound as the
-- server prints it, and whether a detach is pending (PG 14+).
SELECT c.oid,
       n.nspname::text,
       c.relname::text,
       c.relkind::text,
       pg_catalog.pg_get_expr(c.relpartbound, c.oid),
       coalesce((to_jsonb(i) ->> 'inhdetachpending')::bool, false)
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhparent = $1
ORDER BY c.oid
