//! Reading a partition bound as `pg_get_expr(relpartbound)` prints it,
//! with the node's key readers (kept apart from the tree it builds).

use super::key::Key;
use super::{Bound, KeyCol, RangeDatum, Strategy};

/// A token of a printed bound's value list.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Tok {
    Null,
    Min,
    Max,
    Lit(String),
}

/// Parses `FOR VALUES WITH (modulus m, remainder r)`, `FOR VALUES IN
/// (...)`, `FOR VALUES FROM (...) TO (...)`.
pub(super) fn parse_bound(
    text: &str,
    strategy: Strategy,
    keys: &[KeyCol],
) -> std::result::Result<Bound, String> {
    let value = |k: &KeyCol, t: &str| -> std::result::Result<Key, String> {
        k.reader
            .read(t.as_bytes(), &mut Vec::new())
            .ok_or_else(|| format!("value {t:?} is not read on the client"))
    };
    match strategy {
        Strategy::Hash => {
            let rest = text
                .strip_prefix("FOR VALUES WITH (modulus ")
                .and_then(|r| r.strip_suffix(')'))
                .ok_or("not a hash bound")?;
            let (m, r) = rest.split_once(", remainder ").ok_or("not a hash bound")?;
            let modulus: u64 = m.parse().map_err(|_| "bad modulus")?;
            let remainder: u64 = r.parse().map_err(|_| "bad remainder")?;
            if modulus == 0 {
                return Err("modulus 0".into());
            }
            Ok(Bound::Hash { modulus, remainder })
        }
        Strategy::List => {
            let rest = text
                .strip_prefix("FOR VALUES IN ")
                .ok_or("not a list bound")?;
            let (toks, tail) = parse_list(rest)?;
            if !tail.is_empty() {
                return Err("trailing text".into());
            }
            let k = keys.first().ok_or("no key")?;
            let mut values = Vec::new();
            let mut null = false;
            for t in toks {
                match t {
                    Tok::Null => null = true,
                    Tok::Lit(s) => values.push(value(k, &s)?),
                    _ => return Err("MINVALUE/MAXVALUE in a list".into()),
                }
            }
            Ok(Bound::List { values, null })
        }
        Strategy::Range => {
            let rest = text
                .strip_prefix("FOR VALUES FROM ")
                .ok_or("not a range bound")?;
            let (lo, tail) = parse_list(rest)?;
            let tail = tail.strip_prefix(" TO ").ok_or("not a range bound")?;
            let (hi, tail) = parse_list(tail)?;
            if !tail.is_empty() || lo.len() != keys.len() || hi.len() != keys.len() {
                return Err("range bound does not match the key".into());
            }
            let datums = |toks: Vec<Tok>| -> std::result::Result<Vec<RangeDatum>, String> {
                toks.into_iter()
                    .zip(keys)
                    .map(|(t, k)| match t {
                        Tok::Min => Ok(RangeDatum::Min),
                        Tok::Max => Ok(RangeDatum::Max),
                        Tok::Lit(s) => value(k, &s).map(RangeDatum::Value),
                        Tok::Null => Err("NULL in a range bound".into()),
                    })
                    .collect()
            };
            Ok(Bound::Range {
                lower: datums(lo)?,
                upper: datums(hi)?,
            })
        }
    }
}

/// `(a, 'b''c', NULL)` -> tokens, and the text after `)`.
pub(super) fn parse_list(s: &str) -> std::result::Result<(Vec<Tok>, &str), String> {
    let mut rest = s.strip_prefix('(').ok_or("expected (")?;
    let mut out = Vec::new();
    loop {
        if let Some(r) = rest.strip_prefix('\'') {
            // A quoted literal: '' is a quote (standard_conforming_strings).
            let mut lit = String::new();
            let mut chars = r.char_indices();
            let end = loop {
                match chars.next() {
                    Some((i, '\'')) => {
                        if r[i + 1..].starts_with('\'') {
                            lit.push('\'');
                            chars.next();
                        } else {
                            break i + 1;
                        }
                    }
                    Some((_, c)) => lit.push(c),
                    None => return Err("unterminated literal".into()),
                }
            };
            out.push(Tok::Lit(lit));
            rest = &r[end..];
        } else {
            let end = rest.find([',', ')']).ok_or("unterminated list")?;
            let word = rest[..end].trim();
            out.push(match word {
                "NULL" => Tok::Null,
                "MINVALUE" => Tok::Min,
                "MAXVALUE" => Tok::Max,
                w if w.is_empty() || w.contains(['\'', '(', ' ']) => {
                    return Err(format!("cannot read {w:?}"))
                }
                w => Tok::Lit(w.to_owned()),
            });
            rest = &rest[end..];
        }
        if let Some(r) = rest.strip_prefix(", ") {
            rest = r;
        } else if let Some(r) = rest.strip_prefix(')') {
            return Ok((out, r));
        } else {
            return Err(format!("unexpected {rest:?}"));
        }
    }
}
