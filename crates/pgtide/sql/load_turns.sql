-- What the turns of a load into relation $1 (quoted name) need to know
-- (load/turns.rs), over the relation and, when partitioned, its
-- partitions:
-- 1. a unique or exclusion index: a row's fate may depend on another
--    chunk's key;
-- 2. a foreign key from the family into the family: a row may need a
--    row of an earlier chunk;
-- 3. an enabled row trigger on INSERT (not a constraint's): a row may
--    need a row of an earlier chunk, or be judged by what the trigger
--    sees of the table.
WITH family AS (
    SELECT pg_catalog.to_regclass($1) AS relid
  UNION
    SELECT relid FROM pg_catalog.pg_partition_tree(pg_catalog.to_regclass($1))
)
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_index i
               WHERE (i.indisunique OR i.indisexclusion)
                 AND i.indrelid IN (SELECT relid FROM family)),
       EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c
               WHERE c.contype = 'f'
                 AND c.conrelid IN (SELECT relid FROM family)
                 AND (c.confrelid IN (SELECT relid FROM family)
                      -- a partition loaded alone, whose key points at
                      -- its partitioned ancestor
                      OR c.confrelid IN (SELECT relid FROM pg_catalog.pg_partition_ancestors(
                                             pg_catalog.to_regclass($1))))),
       EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
               WHERE t.tgrelid IN (SELECT relid FROM family)
                 AND NOT t.tgisinternal AND t.tgenabled <> 'D'
                 AND (t.tgtype & 1) <> 0      -- FOR EACH ROW
                 AND (t.tgtype & 4) <> 0)     -- INSERT
