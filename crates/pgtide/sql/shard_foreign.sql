-- Foreign table $1: its wrapper, server name, server options, table
-- options, the options of the user mapping that applies to the current
-- user (its own, else PUBLIC; NULL options when not readable), and
-- whether it has enabled row triggers of its own on INSERT (rows loaded
-- directly on the remote server would not fire them).
SELECT w.fdwname::text,
       s.srvname::text,
       coalesce(s.srvoptions, '{}'),
       coalesce(ft.ftoptions, '{}'),
       um.umoptions,
       um.umid IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t
               WHERE t.tgrelid = ft.ftrelid AND NOT t.tgisinternal
                 AND t.tgenabled <> 'D' AND (t.tgtype & 4) <> 0)
FROM pg_catalog.pg_foreign_table ft
JOIN pg_catalog.pg_foreign_server s ON s.oid = ft.ftserver
JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw
LEFT JOIN LATERAL (
    SELECT m.umid, m.umoptions
    FROM pg_catalog.pg_user_mappings m
    WHERE m.srvid = s.oid
      AND (m.umuser = 0 OR m.usename = current_user)
    ORDER BY m.umuser = 0
    LIMIT 1
) um ON true
WHERE ft.ftrelid = $1
