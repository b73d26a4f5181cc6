-- The sequences owned by the tables $1 (serial columns: dependency 'a';
-- identity columns: 'i'), quoted and qualified, for `pgtide copy
-- --create` to set on the target.
SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(s.relname)
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_catalog.pg_namespace n ON n.oid = s.relnamespace
WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
  AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
  AND d.refobjid = ANY ($1::pg_catalog.oid[])
  AND d.deptype IN ('a', 'i')
ORDER BY 1
