-- The target's foreign keys between the copied tables $1 (by position,
-- from 0): (referencing, referenced). A table stands for its family: its
-- partition ancestors (a foreign key declared on a parent checks its
-- partitions' rows; a parent referenced holds its partitions' rows) and
-- its partitions (a foreign key of a partition checks the parent's rows
-- routed there; a partition referenced is part of the parent copied).
-- Two partitions of one table, or partitions of two tables, are tied
-- through their parents, which pg_constraint links: no row links two
-- partitions directly.
WITH copied AS (
    SELECT t, (n - 1)::int AS i FROM unnest($1::pg_catalog.oid[]) WITH ORDINALITY AS x(t, n)
),
family AS (
    SELECT i, t AS relid FROM copied
  UNION
    SELECT i, a.relid FROM copied, pg_catalog.pg_partition_ancestors(t) AS a
  UNION
    SELECT i, r.relid FROM copied, pg_catalog.pg_partition_tree(t) AS r
)
SELECT DISTINCT f.i, g.i
FROM pg_catalog.pg_constraint c
JOIN family f ON f.relid = c.conrelid
JOIN family g ON g.relid = c.confrelid
WHERE c.contype = 'f'
