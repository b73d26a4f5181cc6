-- Whether inserting into relation $1 can drop rows on purpose, without an
-- error: an enabled row trigger on INSERT that runs BEFORE (or INSTEAD OF,
-- on a view) the insert, whose function may return NULL, on the relation
-- or, for a partitioned table, on any partition at any level (rows routed
-- there fire its triggers). With $2 (the INSERT methods) an INSTEAD rule
-- on INSERT counts too; COPY ignores rules. With $3, a foreign table in
-- the tree counts too: its server's table may have such a trigger (a
-- postgres_fdw insert that a remote trigger dropped counts no row).
-- tgtype bits (catalog/pg_trigger.h): ROW 1, BEFORE 2, INSERT 4, INSTEAD 64.
SELECT EXISTS (
           SELECT 1
           FROM pg_catalog.pg_trigger t
           WHERE t.tgrelid IN (SELECT $1::oid
                               UNION ALL
                               SELECT p.relid::oid
                               FROM pg_catalog.pg_partition_tree($1::oid::regclass) p)
             AND t.tgenabled <> 'D'
             AND t.tgtype & 5 = 5
             AND t.tgtype & 66 <> 0)
    OR ($2 AND EXISTS (
           SELECT 1
           FROM pg_catalog.pg_rewrite r
           WHERE r.ev_class = $1::oid
             AND r.ev_type = '3'
             AND r.is_instead
             AND r.ev_enabled <> 'D'))
    OR ($3 AND EXISTS (
           SELECT 1
           FROM pg_catalog.pg_class c
           WHERE c.relkind = 'f'
             AND c.oid IN (SELECT $1::oid
                           UNION ALL
                           SELECT p.relid::oid
                           FROM pg_catalog.pg_partition_tree($1::oid::regclass) p)))
