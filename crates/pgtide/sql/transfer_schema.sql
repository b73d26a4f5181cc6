-- The tables of schema $1 that `pgtide copy --schema` copies: plain and
-- partitioned tables, not their partitions (the parent brings their
-- rows), in name order.
SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.relname
