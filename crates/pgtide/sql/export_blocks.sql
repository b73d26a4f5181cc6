-- Blocks of a table, for cutting it into ctid ranges; read inside the
-- exported snapshot's transaction. $1 is the table's OID.
SELECT pg_catalog.pg_relation_size($1::pg_catalog.oid::pg_catalog.regclass)
       / pg_catalog.current_setting('block_size')::int8
