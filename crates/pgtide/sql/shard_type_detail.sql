-- Type $1 as shard/remote_check.rs compares it across servers: its
-- schema and name, a typmod (-1: the column's is used), the typtype of
-- it or of its element (arrays), that element's schema, an enum's
-- labels in order, and whether it is an array. shard_remote_types.sql
-- gives the same for the remote table's columns.
SELECT n.nspname::text, t.typname::text, -1::int4,
       b.typtype::text, bn.nspname::text,
       CASE WHEN b.typtype = 'e' THEN
           ARRAY(SELECT e.enumlabel::text FROM pg_catalog.pg_enum e
                 WHERE e.enumtypid = b.oid ORDER BY e.enumsortorder)
       END,
       t.typtype <> 'd' AND t.typcategory = 'A'
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype <> 'd' AND t.typcategory = 'A' AND t.typelem <> 0
                                          THEN t.typelem ELSE t.oid END
JOIN pg_catalog.pg_namespace bn ON bn.oid = b.typnamespace
WHERE t.oid = $1
