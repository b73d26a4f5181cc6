//! Whether a column's binary COPY form can pass from one server to the
//! other untouched, checked in both catalogs, never assumed.
//!
//! Binary COPY is each type's `send` output, read back by the other
//! server's `receive`. That is safe when, besides the same major version
//! (checked by the caller), the type is the same on both sides *and*
//! every type OID the binary form carries is the same: `array_send` writes
//! the element type's OID and `record_send` each field's, and the
//! receiving server refuses (or worse, misreads) other OIDs. User-defined
//! types get different OIDs on different servers, so `mood[]` or a
//! composite with an enum field usually goes by text, while a plain
//! `mood` column (sent as its label) or a domain (sent as its base type)
//! does not. reg* values (`regclass`, ...) are OIDs of the source's
//! objects: text moves them by name. A type without binary send/receive
//! cannot go by binary at all.

use std::collections::HashMap;

use tokio_postgres::types::Oid;
use tokio_postgres::Client;

use crate::error::Result;

/// What the catalog says about one type (see `sql/transfer_types.sql`).
#[derive(Debug, Clone)]
struct TypeInfo {
    name: String,
    kind: String,
    elem: Oid,
    base: Oid,
    fields: Vec<Oid>,
    range_sub: Oid,
    multirange_of: Oid,
    binary_io: bool,
    reg: bool,
}

/// The types of one server reachable from some columns' types.
#[derive(Debug, Default)]
pub struct Catalog {
    types: HashMap<Oid, TypeInfo>,
}

/// Deepest nesting followed (composites of arrays of composites ...).
const MAX_DEPTH: usize = 32;

impl Catalog {
    /// Loads `roots` and every type they are made of.
    pub async fn load(client: &Client, roots: &[Oid]) -> Result<Catalog> {
        let mut cat = Catalog::default();
        let mut want: Vec<Oid> = roots.to_vec();
        while !want.is_empty() {
            want.sort_unstable();
            want.dedup();
            let rows = client
                .query(include_str!("../../sql/transfer_types.sql"), &[&want])
                .await?;
            let mut next = Vec::new();
            for r in rows {
                let oid: Oid = r.get(0);
                let t = TypeInfo {
                    name: r.get(1),
                    kind: r.get(2),
                    elem: r.get(3),
                    base: r.get(4),
                    fields: r.get(5),
                    range_sub: r.get(6),
                    multirange_of: r.get(7),
                    binary_io: r.get(8),
                    reg: r.get(9),
                };
                for o in [t.elem, t.base, t.range_sub, t.multirange_of]
                    .into_iter()
                    .chain(t.fields.iter().copied())
                {
                    if o != 0 && !cat.types.contains_key(&o) && o != oid {
                        next.push(o);
                    }
                }
                cat.types.insert(oid, t);
            }
            next.retain(|o| !cat.types.contains_key(o));
            want = next;
        }
        Ok(cat)
    }

    /// The binary form's signature of `oid`: what must be identical on
    /// both servers for its bytes to mean the same thing; `Err` with the
    /// reason when it cannot go by binary at all.
    pub fn signature(&self, oid: Oid) -> std::result::Result<String, String> {
        let mut out = String::new();
        self.walk(oid, 0, &mut out)?;
        Ok(out)
    }

    fn walk(&self, oid: Oid, depth: usize, out: &mut String) -> std::result::Result<(), String> {
        let Some(t) = self.types.get(&oid) else {
            return Err(format!("type {oid} is not in the catalog"));
        };
        if depth > MAX_DEPTH {
            return Err(format!("{} nests too deeply to check", t.name));
        }
        if t.reg {
            return Err(format!(
                "{} values are OIDs of the source's objects (text moves them by name)",
                t.name
            ));
        }
        if !t.binary_io {
            return Err(format!("{} has no binary send/receive functions", t.name));
        }
        out.push_str(&t.name);
        if t.elem != 0 {
            // array_send writes the element type's OID.
            out.push_str(&format!("[{}:", t.elem));
            self.walk(t.elem, depth + 1, out)?;
            out.push(']');
        } else if t.kind == "c" {
            // record_send writes each field's type OID.
            out.push('(');
            for f in &t.fields {
                out.push_str(&format!("{f}:"));
                self.walk(*f, depth + 1, out)?;
                out.push(',');
            }
            out.push(')');
        } else if t.kind == "d" {
            out.push('<');
            self.walk(t.base, depth + 1, out)?;
            out.push('>');
        } else if t.range_sub != 0 {
            out.push('{');
            self.walk(t.range_sub, depth + 1, out)?;
            out.push('}');
        } else if t.multirange_of != 0 {
            out.push('{');
            self.walk(t.multirange_of, depth + 1, out)?;
            out.push('}');
        }
        Ok(())
    }
}

/// Why a column must go by text, comparing its type on the source
/// (`s`, in `sc`) and on the target (`t`, in `tc`); `None` when its
/// binary form passes unchanged.
pub fn text_reason(
    column: &str,
    (sc, s, s_name): (&Catalog, Oid, &str),
    (tc, t, t_name): (&Catalog, Oid, &str),
) -> Option<String> {
    if s_name != t_name {
        return Some(format!(
            "column {column:?} is {s_name} on the source and {t_name} on the target"
        ));
    }
    let a = match sc.signature(s) {
        Ok(a) => a,
        Err(why) => return Some(format!("column {column:?}: {why}")),
    };
    let b = match tc.signature(t) {
        Ok(b) => b,
        Err(why) => return Some(format!("column {column:?}: {why}")),
    };
    (a != b).then(|| {
        format!(
            "column {column:?} ({s_name}): its binary form carries type OIDs (array \
             elements, composite fields) that differ between the servers"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, kind: &str) -> TypeInfo {
        TypeInfo {
            name: name.into(),
            kind: kind.into(),
            elem: 0,
            base: 0,
            fields: vec![],
            range_sub: 0,
            multirange_of: 0,
            binary_io: true,
            reg: false,
        }
    }

    fn catalog(types: &[(Oid, TypeInfo)]) -> Catalog {
        Catalog {
            types: types.iter().cloned().collect(),
        }
    }

    #[test]
    fn embedded_oids_decide_and_plain_user_types_do_not() {
        let mut arr = t("mood[]", "b");
        arr.elem = 16_400;
        let src = catalog(&[(16_400, t("mood", "e")), (16_399, arr.clone())]);
        arr.elem = 16_500;
        let dst = catalog(&[(16_500, t("mood", "e")), (16_499, arr)]);
        // A plain enum column: sent as its label, the OID does not travel.
        assert_eq!(
            text_reason("e", (&src, 16_400, "mood"), (&dst, 16_500, "mood")),
            None
        );
        // An array of it carries the element OID.
        let why = text_reason("a", (&src, 16_399, "mood[]"), (&dst, 16_499, "mood[]"));
        assert!(why.unwrap().contains("differ"));
        // Different names.
        assert!(text_reason("i", (&src, 16_400, "integer"), (&dst, 16_500, "bigint")).is_some());
    }

    #[test]
    fn reg_types_and_types_without_binary_io_go_by_text() {
        let mut rc = t("regclass", "b");
        rc.reg = true;
        let mut nb = t("thing", "b");
        nb.binary_io = false;
        let c = catalog(&[(2205, rc), (9, nb)]);
        assert!(c.signature(2205).unwrap_err().contains("OIDs"));
        assert!(c.signature(9).unwrap_err().contains("binary"));
    }
}
