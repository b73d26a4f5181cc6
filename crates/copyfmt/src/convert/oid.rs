//! The built-in type OIDs that [`Encoder`](super::Encoder) knows, as
//! fixed in PostgreSQL's `pg_type.dat` (they never change between
//! versions), and the map from an array type to its element type.

/// `boolean`
pub const BOOL: u32 = 16;
/// `bytea`
pub const BYTEA: u32 = 17;
/// `name`
pub const NAME: u32 = 19;
/// `bigint`
pub const INT8: u32 = 20;
/// `smallint`
pub const INT2: u32 = 21;
/// `integer`
pub const INT4: u32 = 23;
/// `text`
pub const TEXT: u32 = 25;
/// `json`
pub const JSON: u32 = 114;
/// `real`
pub const FLOAT4: u32 = 700;
/// `double precision`
pub const FLOAT8: u32 = 701;
/// `character(n)`
pub const BPCHAR: u32 = 1042;
/// `character varying(n)`
pub const VARCHAR: u32 = 1043;
/// `date`
pub const DATE: u32 = 1082;
/// `time without time zone`
pub const TIME: u32 = 1083;
/// `timestamp without time zone`
pub const TIMESTAMP: u32 = 1114;
/// `timestamp with time zone`
pub const TIMESTAMPTZ: u32 = 1184;
/// `interval`
pub const INTERVAL: u32 = 1186;
/// `numeric`
pub const NUMERIC: u32 = 1700;
/// `uuid`
pub const UUID: u32 = 2950;
/// `jsonb`
pub const JSONB: u32 = 3802;

/// Array type OID → element type OID, for the element types above.
const ARRAYS: [(u32, u32); 20] = [
    (1000, BOOL),
    (1001, BYTEA),
    (1003, NAME),
    (1005, INT2),
    (1007, INT4),
    (1009, TEXT),
    (1014, BPCHAR),
    (1015, VARCHAR),
    (1016, INT8),
    (1021, FLOAT4),
    (1022, FLOAT8),
    (1115, TIMESTAMP),
    (1182, DATE),
    (1183, TIME),
    (1185, TIMESTAMPTZ),
    (1187, INTERVAL),
    (1231, NUMERIC),
    (2951, UUID),
    (199, JSON),
    (3807, JSONB),
];

/// The element type of the array type `array_oid`, if it is one of ours.
pub fn element_of(array_oid: u32) -> Option<u32> {
    ARRAYS
        .iter()
        .find(|&&(a, _)| a == array_oid)
        .map(|&(_, e)| e)
}

/// The array type whose elements are `elem_oid`, if it is one of ours.
pub fn array_of(elem_oid: u32) -> Option<u32> {
    ARRAYS
        .iter()
        .find(|&&(_, e)| e == elem_oid)
        .map(|&(a, _)| a)
}
