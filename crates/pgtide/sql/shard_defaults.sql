-- Columns named in $2 (those the input leaves out) that relations among
-- $1 (a partitioned table and its leaves) give a value of their own when
-- a row does not: a default (its expression as text) or an identity. A
-- generated column is computed either way, and left out.
SELECT a.attrelid,
       a.attname::text,
       pg_catalog.pg_get_expr(d.adbin, d.adrelid),
       a.attidentity <> ''
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY($1) AND a.attname = ANY($2)
  AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
  AND (d.adbin IS NOT NULL OR a.attidentity <> '')
