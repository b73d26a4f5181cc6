-- Columns of the remote table $1 (quoted, schema-qualified), on the
-- shard: name, then what shard_type_detail.sql gives for its type (with
-- the column's typmod), then the type as SQL spells it, then whether
-- COPY gives it a value of its own when it is not loaded (a default, an
-- identity; a generated column is computed either way).
SELECT a.attname::text,
       n.nspname::text, t.typname::text, a.atttypmod,
       b.typtype::text, bn.nspname::text,
       CASE WHEN b.typtype = 'e' THEN
           ARRAY(SELECT e.enumlabel::text FROM pg_catalog.pg_enum e
                 WHERE e.enumtypid = b.oid ORDER BY e.enumsortorder)
       END,
       t.typtype <> 'd' AND t.typcategory = 'A',
       pg_catalog.format_type(a.atttypid, a.atttypmod),
       (a.atthasdef AND a.attgenerated = '') OR a.attidentity <> ''
FROM pg_catalog.pg_attribute a
JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
JOIN pg_catalog.pg_type b ON b.oid = CASE WHEN t.typtype <> 'd' AND t.typcategory = 'A' AND t.typelem <> 0
                                          THEN t.typelem ELSE t.oid END
JOIN pg_catalog.pg_namespace bn ON bn.oid = b.typnamespace
WHERE a.attrelid = pg_catalog.to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
