-- What an export needs to know about a relation: its kind, its table
-- access method (ctid ranges are a heap notion), and the rows estimated
-- by the planner's statistics over the relation and all its partitions
-- (for progress; 0 when never analyzed). $1 is the relation's OID.
SELECT c.relkind::text,
       coalesce(am.amname::text, ''),
       (SELECT coalesce(sum(greatest(p.reltuples, 0)), 0)::float8
          FROM pg_catalog.pg_partition_tree(c.oid) t
          JOIN pg_catalog.pg_class p ON p.oid = t.relid)
FROM pg_catalog.pg_class c
LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam
WHERE c.oid = $1
