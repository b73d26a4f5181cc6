-- The tables of schema $1 that `pgtide copy --schema` copies, $2 being
-- every schema named by --schema: plain and partitioned tables, not the
-- partitions of a table in one of those schemas (that parent brings their
-- rows), but a partition whose parents all live elsewhere is copied as a
-- table of its own; in name order.
SELECT n.nspname::text, c.relname::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
  AND NOT EXISTS (
      SELECT 1
      FROM pg_catalog.pg_partition_ancestors(c.oid) AS a
      JOIN pg_catalog.pg_class ac ON ac.oid = a.relid
      JOIN pg_catalog.pg_namespace an ON an.oid = ac.relnamespace
      WHERE a.relid <> c.oid AND an.nspname = ANY ($2::text[]))
ORDER BY c.relname
