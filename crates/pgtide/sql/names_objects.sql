-- Whether a value of any of the types $1 holds a reg* value (regclass,
-- regtype, ...), whose text is an object's name resolved through the
-- session's search_path: the type itself, or what it is made of (a
-- domain's base type, an array's element, a range's subtype, a
-- multirange's range, a composite type's attributes).
WITH RECURSIVE parts(oid) AS (
    SELECT unnest($1::pg_catalog.oid[])
  UNION
    SELECT part.oid
    FROM parts
    JOIN pg_catalog.pg_type y ON y.oid = parts.oid
    CROSS JOIN LATERAL (
        SELECT y.typbasetype WHERE y.typtype = 'd'
        UNION ALL
        SELECT y.typelem WHERE y.typelem <> 0
        UNION ALL
        SELECT r.rngsubtype FROM pg_catalog.pg_range r WHERE r.rngtypid = y.oid
        UNION ALL
        SELECT r.rngtypid FROM pg_catalog.pg_range r WHERE r.rngmultitypid = y.oid
        UNION ALL
        SELECT a.atttypid FROM pg_catalog.pg_attribute a
        WHERE y.typtype = 'c' AND a.attrelid = y.typrelid AND a.attnum > 0
          AND NOT a.attisdropped
    ) AS part(oid)
)
SELECT EXISTS (
    SELECT 1 FROM parts JOIN pg_catalog.pg_type y ON y.oid = parts.oid
    WHERE y.typnamespace = 'pg_catalog'::pg_catalog.regnamespace
      AND y.typname IN ('regclass', 'regcollation', 'regconfig', 'regdictionary',
                        'regnamespace', 'regoper', 'regoperator', 'regproc',
                        'regprocedure', 'regrole', 'regtype')
)
