-- The foreign keys of table $1 that reference another table (not the
-- table itself, nor, for a partition, one of its ancestors), each with
-- its columns in key order and the referenced table and columns, quoted.
-- Left out: the clones PostgreSQL makes of a key that references a
-- partitioned table, one per referenced partition (their parent, on the
-- same referencing table, stands for them).
SELECT
  (SELECT array_agg(a.attname::text ORDER BY k.o)
     FROM unnest(c.conkey) WITH ORDINALITY AS k(n, o)
     JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n) AS columns,
  (SELECT array_agg(quote_ident(a.attname) ORDER BY k.o)
     FROM unnest(c.confkey) WITH ORDINALITY AS k(n, o)
     JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n) AS referenced,
  CASE WHEN r.relkind = 'p' THEN '' ELSE 'ONLY ' END
    || quote_ident(n.nspname) || '.' || quote_ident(r.relname) AS ref
FROM pg_constraint c
JOIN pg_class r ON r.oid = c.confrelid
JOIN pg_namespace n ON n.oid = r.relnamespace
WHERE c.conrelid = $1
  AND c.contype = 'f'
  AND c.confrelid NOT IN (SELECT relid FROM pg_partition_ancestors(c.conrelid))
  AND NOT EXISTS (SELECT FROM pg_constraint p
                  WHERE p.oid = c.conparentid AND p.conrelid = c.conrelid)
ORDER BY c.conname
