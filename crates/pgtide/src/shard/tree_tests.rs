//! Routing a split record through a partition tree.

use super::*;

#[test]
fn lists() {
    let (t, rest) = parse_list("(1, 'a''b', NULL, MINVALUE) TO (2)").unwrap();
    assert_eq!(
        t,
        vec![
            Tok::Lit("1".into()),
            Tok::Lit("a'b".into()),
            Tok::Null,
            Tok::Min
        ]
    );
    assert_eq!(rest, " TO (2)");
    let (t, _) = parse_list("('x, y)')").unwrap();
    assert_eq!(t, vec![Tok::Lit("x, y)".into())]);
    assert!(parse_list("(1::int)").is_ok()); // read as a literal, then refused by the reader
}
