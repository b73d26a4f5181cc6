//! The partition tree of a partitioned target, from the catalog.
//!
//! `pg_partitioned_table` gives each partitioned table's strategy and key
//! (columns, opclasses, collations), `pg_inherits` its partitions, and
//! `pg_get_expr(relpartbound)` each partition's bound as the server prints
//! it (read in a session with `DateStyle ISO` and `TimeZone UTC`, so every
//! printed value is in a form the key readers accept). Sub-partitioned
//! partitions are read recursively; DEFAULT partitions are kept.
//!
//! A node of the tree that the client cannot route exactly is marked
//! `coordinator` with the reason: rows that reach it are loaded through
//! the coordinator, which routes them itself. That is the case for key
//! expressions, key columns not in the input, key types without a reader
//! here, non-default opclasses, nondeterministic collations for hash and
//! list keys, text range keys under a collation other than "C"/"POSIX",
//! partitions with a pending detach, and bounds the readers cannot read.

use std::cmp::Ordering;

use copyfmt::fields::Fields;
use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use super::key::{self, Key, KeyReader};
#[path = "tree_bound.rs"]
mod bound;
use crate::error::{Error, Result};
use crate::ident::QualifiedName;
use bound::parse_bound;
#[cfg(test)]
use bound::{parse_list, Tok};

/// Partitioning strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `PARTITION BY HASH`.
    Hash,
    /// `PARTITION BY LIST`.
    List,
    /// `PARTITION BY RANGE`.
    Range,
}

/// One bound datum of a range partition.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RangeDatum {
    Min,
    Max,
    Value(Key),
}

/// A partition's bound.
#[derive(Debug, Clone)]
enum Bound {
    Hash {
        modulus: u64,
        remainder: u64,
    },
    List {
        values: Vec<Key>,
        null: bool,
    },
    Range {
        lower: Vec<RangeDatum>,
        upper: Vec<RangeDatum>,
    },
}

/// A partition: a leaf (index into [`Tree::leaves`]) or a partitioned
/// table of its own.
#[derive(Debug, Clone)]
pub enum Child {
    /// A leaf.
    Leaf(usize),
    /// A sub-partitioned partition.
    Node(Box<Node>),
}

/// One key column: where it is in the input and how to read it.
#[derive(Debug, Clone)]
struct KeyCol {
    field: usize,
    reader: KeyReader,
}

/// A partitioned table in the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// Its name.
    pub name: QualifiedName,
    /// Its strategy.
    pub strategy: Strategy,
    /// Key column names (for the plan).
    pub key_names: Vec<String>,
    /// Why rows reaching this node go through the coordinator.
    pub coordinator: Option<String>,
    keys: Vec<KeyCol>,
    types: Vec<key::KeyType>,
    parts: Vec<(Bound, Child)>,
    default: Option<Child>,
}

/// A leaf partition: a table that stores rows.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// Its OID on the coordinator.
    pub oid: Oid,
    /// Its name on the coordinator.
    pub name: QualifiedName,
    /// `r` (table) or `f` (foreign table).
    pub relkind: char,
    /// Its bound as the server prints it (for the plan).
    pub bound: String,
}

/// The whole tree.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The target.
    pub root: Node,
    /// Every leaf, in tree order.
    pub leaves: Vec<Leaf>,
}

/// Where one row goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Leaf `i` of [`Tree::leaves`].
    Leaf(usize),
    /// Through the coordinator (the server routes, or refuses, it).
    Coordinator,
}

/// Scratch space for routing, reused from row to row.
#[derive(Debug, Default)]
pub struct Scratch {
    buf: Vec<u8>,
    keys: Vec<Option<Key>>,
}

impl Tree {
    /// Reads the tree of partitioned table `oid`. `columns` are the input's
    /// columns (file order) by name; key columns are found among them.
    /// Opens no session of its own: the caller gives a connection on which
    /// `DateStyle` ISO and `TimeZone` UTC were set (see [`session_sql`]).
    pub async fn read(
        client: &Client,
        oid: Oid,
        name: QualifiedName,
        columns: &[(String, u32, i32)],
    ) -> Result<Tree> {
        let facts = DbFacts::read(client).await?;
        let mut leaves = Vec::new();
        let root = read_node(client, oid, name, columns, &facts, &mut leaves, 0).await?;
        Ok(Tree { root, leaves })
    }

    /// How many leading fields of a record routing reads: up to the last
    /// key column of any partitioned table in the tree.
    pub fn fields_read(&self) -> usize {
        fn walk(n: &Node) -> usize {
            let own = n.keys.iter().map(|k| k.field + 1).max().unwrap_or(0);
            let kids = n.parts.iter().map(|(_, c)| c).chain(&n.default);
            kids.filter_map(|c| match c {
                Child::Node(n) => Some(walk(n)),
                Child::Leaf(_) => None,
            })
            .fold(own, usize::max)
        }
        walk(&self.root)
    }

    /// The leaf (or the coordinator) for the record split into `fields`.
    pub fn route(&self, fields: &Fields, s: &mut Scratch) -> Dest {
        let mut node = &self.root;
        loop {
            let child = match node.route(fields, s) {
                Some(c) => c,
                None => return Dest::Coordinator,
            };
            match child {
                Child::Leaf(i) => return Dest::Leaf(*i),
                Child::Node(n) => node = n,
            }
        }
    }
}

/// Statements that make `pg_get_expr` print values the readers accept.
pub fn session_sql() -> &'static str {
    "SET DateStyle = ISO; SET TimeZone = 'UTC'; SET IntervalStyle = postgres; \
     SET extra_float_digits = 3; SET standard_conforming_strings = on"
}

impl Node {
    fn route<'a>(&'a self, fields: &Fields, s: &mut Scratch) -> Option<&'a Child> {
        if self.coordinator.is_some() {
            return None;
        }
        s.keys.clear();
        for k in &self.keys {
            let v = match fields.get(k.field) {
                None => None,
                Some(text) => Some(k.reader.read(text, &mut s.buf)?),
            };
            s.keys.push(v);
        }
        let found = match self.strategy {
            Strategy::Hash => {
                let h = key::row_hash(&self.types, &s.keys)?;
                self.parts.iter().find_map(|(b, c)| match b {
                    Bound::Hash { modulus, remainder } if h % modulus == *remainder => Some(c),
                    _ => None,
                })
            }
            Strategy::List => {
                let v = s.keys.first()?;
                self.parts.iter().find_map(|(b, c)| match (b, v) {
                    (Bound::List { null: true, .. }, None) => Some(c),
                    // Equal as the type's btree says (numeric 2.5 = 2.50).
                    (Bound::List { values, .. }, Some(v))
                        if values
                            .iter()
                            .any(|x| key::compare(x, v) == Some(Ordering::Equal)) =>
                    {
                        Some(c)
                    }
                    _ => None,
                })
            }
            Strategy::Range => {
                if s.keys.iter().any(Option::is_none) {
                    None
                } else {
                    let mut hit = None;
                    for (b, c) in &self.parts {
                        if let Bound::Range { lower, upper } = b {
                            let lo = bound_cmp(lower, &s.keys)?;
                            let hi = bound_cmp(upper, &s.keys)?;
                            if lo != Ordering::Greater && hi == Ordering::Greater {
                                hit = Some(c);
                                break;
                            }
                        }
                    }
                    hit
                }
            }
        };
        // No partition: the DEFAULT one, else the server's error.
        found.or(self.default.as_ref())
    }

    /// Every leaf under this node (for plans).
    pub fn children(&self) -> impl Iterator<Item = &Child> {
        self.parts
            .iter()
            .map(|(_, c)| c)
            .chain(self.default.as_ref())
    }
}

/// `partition_rbound_datum_cmp`: the bound against the row's key.
fn bound_cmp(bound: &[RangeDatum], keys: &[Option<Key>]) -> Option<Ordering> {
    for (b, k) in bound.iter().zip(keys) {
        let k = k.as_ref()?;
        let ord = match b {
            RangeDatum::Min => return Some(Ordering::Less),
            RangeDatum::Max => return Some(Ordering::Greater),
            RangeDatum::Value(v) => key::compare(v, k)?,
        };
        if ord != Ordering::Equal {
            return Some(ord);
        }
    }
    Some(Ordering::Equal)
}

/// What the database says about the default collation.
struct DbFacts {
    /// The database's collation is byte order ("C"/"POSIX" with the libc
    /// provider).
    default_is_c: bool,
}

impl DbFacts {
    async fn read(client: &Client) -> Result<DbFacts> {
        let row = client
            .query_one(
                "SELECT d.datcollate::text, coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') \
                 FROM pg_catalog.pg_database d WHERE d.datname = current_database()",
                &[],
            )
            .await?;
        let collate: String = row.get(0);
        let provider: String = row.get(1);
        Ok(DbFacts {
            default_is_c: provider == "c" && matches!(collate.as_str(), "C" | "POSIX"),
        })
    }
}

/// One key column as the catalog gives it.
struct KeyRow {
    strategy: String,
    attname: Option<String>,
    type_oid: u32,
    typmod: i32,
    default_opclass: bool,
    collation: String,
    deterministic: bool,
}

const MAX_DEPTH: usize = 32;

async fn read_node(
    client: &Client,
    oid: Oid,
    name: QualifiedName,
    columns: &[(String, u32, i32)],
    facts: &DbFacts,
    leaves: &mut Vec<Leaf>,
    depth: usize,
) -> Result<Node> {
    if depth > MAX_DEPTH {
        return Err(Error::bug(format!(
            "partition tree of {name} deeper than {MAX_DEPTH}"
        )));
    }
    let rows: Vec<KeyRow> = client
        .query(include_str!("../../sql/shard_key.sql"), &[&oid])
        .await?
        .iter()
        .map(|r| KeyRow {
            strategy: r.get(0),
            attname: r.get(2),
            type_oid: r.get::<_, Option<u32>>(3).unwrap_or(0),
            typmod: r.get::<_, Option<i32>>(4).unwrap_or(-1),
            default_opclass: r.get(5),
            collation: r.get(6),
            deterministic: r.get(7),
        })
        .collect();
    let strategy = match rows.first().map(|r| r.strategy.as_str()) {
        Some("h") => Strategy::Hash,
        Some("l") => Strategy::List,
        Some("r") => Strategy::Range,
        _ => return Err(Error::bug(format!("{name} has no partition key"))),
    };
    let mut coordinator = None;
    let mut keys = Vec::new();
    let mut key_names = Vec::new();
    for r in &rows {
        match key_column(r, strategy, columns, facts) {
            Ok(k) => keys.push(k),
            Err(why) => {
                coordinator.get_or_insert(why);
            }
        }
        key_names.push(r.attname.clone().unwrap_or_else(|| "(expression)".into()));
    }
    let mut node = Node {
        name,
        strategy,
        key_names,
        coordinator,
        types: keys.iter().map(|k: &KeyCol| k.reader.ty()).collect(),
        keys,
        parts: Vec::new(),
        default: None,
    };
    let children = client
        .query(include_str!("../../sql/shard_children.sql"), &[&oid])
        .await?;
    for r in children {
        let child_oid: Oid = r.get(0);
        let child_name = QualifiedName {
            schema: Some(r.get(1)),
            name: r.get(2),
        };
        let relkind: String = r.get(3);
        let bound_text: String = r.get::<_, Option<String>>(4).unwrap_or_default();
        let detaching: bool = r.get(5);
        if detaching && node.coordinator.is_none() {
            node.coordinator = Some(format!("partition {child_name} is being detached"));
        }
        let child = if relkind == "p" {
            let sub = Box::pin(read_node(
                client,
                child_oid,
                child_name,
                columns,
                facts,
                leaves,
                depth + 1,
            ))
            .await?;
            Child::Node(Box::new(sub))
        } else {
            leaves.push(Leaf {
                oid: child_oid,
                name: child_name,
                relkind: relkind.chars().next().unwrap_or('r'),
                bound: bound_text.clone(),
            });
            Child::Leaf(leaves.len() - 1)
        };
        if bound_text == "DEFAULT" {
            node.default = Some(child);
            continue;
        }
        match parse_bound(&bound_text, strategy, &node.keys) {
            Ok(b) => node.parts.push((b, child)),
            Err(why) => {
                if node.coordinator.is_none() {
                    node.coordinator = Some(format!("bound {bound_text:?}: {why}"));
                }
                // Keep the child reachable for the plan.
                node.parts.push((
                    Bound::List {
                        values: Vec::new(),
                        null: false,
                    },
                    child,
                ));
            }
        }
    }
    Ok(node)
}

/// How to read one key column, or why the client cannot.
fn key_column(
    r: &KeyRow,
    strategy: Strategy,
    columns: &[(String, u32, i32)],
    facts: &DbFacts,
) -> std::result::Result<KeyCol, String> {
    let name = r
        .attname
        .as_deref()
        .ok_or("the partition key has an expression")?;
    let field = columns
        .iter()
        .position(|c| c.0 == name)
        .ok_or_else(|| format!("key column {name:?} is not in the input"))?;
    let reader = KeyReader::new(r.type_oid, r.typmod)
        .ok_or_else(|| format!("key column {name:?} has a type not routed on the client"))?;
    if !r.default_opclass {
        return Err(format!(
            "key column {name:?} has a non-default operator class"
        ));
    }
    if reader.ty().collatable() {
        let c_order = matches!(r.collation.as_str(), "C" | "POSIX")
            || (r.collation == "default" && facts.default_is_c);
        if !r.deterministic {
            return Err(format!(
                "key column {name:?} has a nondeterministic collation"
            ));
        }
        if strategy == Strategy::Range && !c_order {
            return Err(format!(
                "range key column {name:?} has collation {:?}, not byte order (\"C\")",
                r.collation
            ));
        }
    }
    Ok(KeyCol { field, reader })
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
