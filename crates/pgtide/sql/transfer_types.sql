-- What decides whether binary COPY of a type can pass between two servers
-- unchanged, for the types in $1: its name; its kind; the OIDs its binary
-- form carries (an array's element type, a composite's field types);
-- what it is made of (a domain's base type, a range's subtype, a
-- multirange's range), since those are what is sent; whether it has
-- binary send/receive functions; whether its values are OIDs of server
-- objects (the reg* types). rngmultitypid exists since PostgreSQL 14.
SELECT t.oid,
       pg_catalog.format_type(t.oid, NULL),
       t.typtype::text,
       CASE WHEN t.typlen = -1 AND t.typelem <> 0 THEN t.typelem ELSE 0 END::oid,
       t.typbasetype,
       coalesce((SELECT pg_catalog.array_agg(a.atttypid ORDER BY a.attnum)
                   FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped),
                '{}')::oid[],
       coalesce((SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = t.oid), 0)::oid,
       coalesce((SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = t.oid), 0)::oid,
       t.typsend::oid <> 0 AND t.typreceive::oid <> 0,
       t.typnamespace = 'pg_catalog'::regnamespace
         AND t.typname::text IN ('regproc', 'regprocedure', 'regoper', 'regoperator',
                                 'regclass', 'regtype', 'regrole', 'regnamespace',
                                 'regconfig', 'regdictionary', 'regcollation')
FROM pg_catalog.pg_type t
WHERE t.oid = ANY($1)
