-- Columns of foreign table $1: local name, remote name (postgres_fdw's
-- column_name option, else the local name), and whether it has a
-- default of its own on the coordinator.
SELECT a.attname::text,
       coalesce((SELECT o.option_value FROM pg_catalog.pg_options_to_table(a.attfdwoptions) o
                 WHERE o.option_name = 'column_name'), a.attname::text),
       a.atthasdef
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
