-- Whether relation $1 has an enabled INSTEAD rule on INSERT. Such a rule
-- replaces an INSERT, and the server then reports the row count of the
-- rule's own last INSERT action (or 0), not of the rows given to the table
-- (PostgreSQL docs, "Rules and Command Status"). COPY ignores rules.
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_rewrite r
    WHERE r.ev_class = $1::oid
      AND r.ev_type = '3'
      AND r.is_instead
      AND r.ev_enabled <> 'D')
