-- Whether row-level security on relation $1 applies to the current role
-- and no permissive policy for INSERT (or ALL) is the role's (its own, a
-- role whose privileges it has, as the server decides, or PUBLIC): the
-- server then refuses every row.
SELECT pg_catalog.row_security_active($1::oid)
   AND NOT EXISTS (
       SELECT 1 FROM pg_catalog.pg_policy p
       WHERE p.polrelid = $1::oid
         AND p.polpermissive
         AND p.polcmd IN ('*', 'a')
         AND (0::oid = ANY (p.polroles)
              OR EXISTS (SELECT 1 FROM unnest(p.polroles) AS r(role)
                         WHERE pg_catalog.pg_has_role(r.role, 'USAGE'))))
