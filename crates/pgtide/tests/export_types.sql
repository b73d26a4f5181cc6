-- A table with every kind of built-in type COPY has to get right, a
-- generated column and a dropped column, for export -> load round trips.
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TYPE pair AS (a int, b text);
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE typed (
    id int PRIMARY KEY,
    gone text,
    b bool, i2 smallint, i8 bigint, f4 real, f8 double precision,
    n numeric, n2 numeric(10, 3), m money,
    t text, vc varchar(20), ch char(5), nm name, by bytea,
    d date, tm time, ttz timetz, ts timestamp, tstz timestamptz, iv interval,
    u uuid, j json, jb jsonb, x xml,
    inet_ inet, cidr_ cidr, mac macaddr, mac8 macaddr8, bits bit(4), vb varbit,
    pt point, ln line, ls lseg, bx box, pa path, pg polygon, ci circle,
    tsv tsvector, tsq tsquery, oid_ oid, rc regclass, pl pg_lsn,
    ia int[], ta text[], a2 int[][], ja jsonb[],
    r4 int4range, rn numrange, rts tstzrange, rd daterange, mr int4multirange,
    e mood, c pair, ca pair[], dm posint,
    twice bigint GENERATED ALWAYS AS (i2::bigint * 2) STORED
);
ALTER TABLE typed DROP COLUMN gone;
INSERT INTO typed VALUES
 (1, true, 1, 1, 1.5, 1.25, '123.456', 1.5, '12.34',
  'plain', 'vc', 'ab', 'nm', '\x00ff10',
  '2024-02-29', '12:34:56.789', '12:00+05', '2024-01-01 00:00:00.000001', '2024-01-01 12:00+00', '1 year 2 mons 3 days 04:05:06.7',
  'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', '{"b": {"c": null}}', '<r a="1">x</r>',
  '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'10101',
  '(1,2)', '{1,2,3}', '[(0,0),(1,1)]', '(1,1),(0,0)', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(1,0))', '<(0,0),2>',
  'a fat cat', 'fat & cat', 42, 'pg_class', '16/B374D848',
  '{1,NULL,3}', '{"a b","c,d","e\"f",NULL,"NULL",""}', '{{1,2},{3,4}}', ARRAY['{"k": 1}'::jsonb],
  '[1,10)', '(1.5,2.5]', '[2024-01-01 00:00+00,infinity)', 'empty', '{[1,3), [5,7)}',
  'happy', '(1,"x, \"y\"")', ARRAY['(2,z)'::pair, NULL], 7),
 (2, false, -32768, -9223372036854775808, 'NaN', '-Infinity', 'NaN', 'NaN', '-0.01',
  E'tab\there\nnewline \\ backslash', '', ' ', '', '\x',
  '4713-01-01 BC', '24:00:00', '00:00:00-12', '4713-01-01 00:00:00 BC', '-infinity', '-178000000 years',
  '00000000-0000-0000-0000-000000000000', '"ünïcødé €"', '[]', '<x/>',
  '::1', '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', B'0000', B'',
  '(-1.5,1e+300)', '{0,1,0}', '[(0,0),(0,0)]', '(0,0),(0,0)', '((0,0),(1,1))', '((0,0))', '<(1,1),0>',
  '', 'a', 0, '-', '0/0',
  '{}', '{}', '{}', '{}',
  '(,)', '[-Infinity,Infinity]', 'empty', '(,2000-01-01]', '{}',
  'sad', '(,)', '{}', 1),
 (3, NULL, 32767, 9223372036854775807, 'Infinity', 'Infinity', 'Infinity', NULL, NULL,
  '\N', NULL, NULL, NULL, NULL,
  'infinity', NULL, NULL, 'infinity', 'infinity', NULL,
  NULL, 'null', 'null', NULL,
  NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL,
  NULL, ARRAY[NULL]::text[], NULL, NULL,
  NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL),
 (4, true, 0, 0, 3.4028235e38, 1.7976931348623157e308, '-Infinity', '0', '0',
  '\.', '\.', '"', '"q"', '\x5c2e0a',
  '-infinity', '00:00', '23:59:59.999999+14', '-infinity', '294276-12-31 23:59:59.999999+00', '-1 day +01:00',
  'ffffffff-ffff-ffff-ffff-ffffffffffff', '{"s": "a\"b\\c\n"}', '{"n": 1.0e+2, "big": 123456789012345678901234567890}', NULL,
  '0.0.0.0', '255.255.255.255/32', 'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff', B'1111', B'1',
  '(0,-0)', '{1,-1,0}', '[(1,2),(3,4)]', '(3,4),(1,2)', '[(1,2)]', '((1,2))', '<(0,0),1e-10>',
  'ünïcødé:1A ''quoted lexeme''', '!a | b', 4294967295, 'pg_type', 'FFFFFFFF/FFFFFFFF',
  '{-2147483648,2147483647}', '{"\\N","\\.",",","{}"}', '{{NULL,NULL}}', ARRAY['null'::jsonb, NULL],
  '[-2147483648,2147483647)', '[0,0]', '(-infinity,infinity)', '[4713-01-01 BC,infinity)', '{(,0), [10,)}',
  'ok', '(,"")', ARRAY[NULL::pair], 2147483647);
INSERT INTO typed (id, t, n, by)
  SELECT g, repeat(chr(32 + g % 90), g % 300), g / 3.0, decode(repeat('00ff', g % 50), 'hex')
  FROM generate_series(5, 3000) g;
