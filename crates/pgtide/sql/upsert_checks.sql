-- The CHECK constraints of relation $1 whose columns are all among the
-- loaded ones ($2, names as stored): what the staging table's rows can be
-- tested against (load/upsert/checks.rs), as deparsed expressions over
-- those column names.
SELECT pg_catalog.pg_get_expr(c.conbin, c.conrelid)
FROM pg_catalog.pg_constraint c
WHERE c.conrelid = $1::oid
  AND c.contype = 'c'
  -- PostgreSQL 18's NOT ENFORCED constraints refuse nothing (the column
  -- is not there before 18)
  AND coalesce((pg_catalog.to_jsonb(c) ->> 'conenforced')::bool, true)
  AND c.conkey <@ (SELECT coalesce(array_agg(a.attnum), '{}')
                   FROM pg_catalog.pg_attribute a
                   WHERE a.attrelid = $1::oid
                     AND a.attnum > 0
                     AND NOT a.attisdropped
                     AND a.attname = ANY ($2::text[]))
ORDER BY c.conname
