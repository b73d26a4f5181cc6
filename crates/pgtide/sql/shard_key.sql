-- The partition key of partitioned table $1, one row per key column in
-- key order: strategy, the column (NULL attname for an expression), its
-- type and typmod, whether the opclass is the type's default one, the
-- collation's name and whether it is deterministic (PG 12+; read through
-- to_jsonb so older catalogs answer too).
SELECT pt.partstrat::text,
       k.ord::int4,
       a.attname::text,
       a.atttypid,
       a.atttypmod,
       oc.opcdefault,
       coalesce(co.collname::text, ''),
       coalesce((to_jsonb(co) ->> 'collisdeterministic')::bool, true)
FROM pg_catalog.pg_partitioned_table pt
CROSS JOIN LATERAL unnest(pt.partattrs::int2[], pt.partclass::oid[], pt.partcollation::oid[])
     WITH ORDINALITY AS k(attnum, opclass, coll, ord)
LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum AND k.attnum > 0
JOIN pg_catalog.pg_opclass oc ON oc.oid = k.opclass
LEFT JOIN pg_catalog.pg_collation co ON co.oid = k.coll
WHERE pt.partrelid = $1
ORDER BY k.ord
