//! `[[rewrite]]` read in order, and its bad keys named.

use crate::config::{default_raw, parse_raw};

fn error_for(text: &str) -> String {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("t", text).unwrap());
    raw.validate().unwrap_err().to_string()
}

#[test]
fn rules_are_read_and_bad_ones_named() {
    let mut raw = default_raw().unwrap();
    let rule = "[[rewrite]]\nsource_topic = \"x/#\"\nre = \"^x/(.+)$\"\ndest_topic = \"y/$1\"\n";
    raw.overlay(parse_raw("t", rule).unwrap());
    assert!(!raw.validate().unwrap().routing.rewrite.is_empty());
    let bad_re = error_for("[[rewrite]]\nsource_topic = \"x/#\"\nre = \"(\"\ndest_topic = \"y\"\n");
    assert!(bad_re.contains("rewrite.re"), "{bad_re}");
    let bad_group =
        error_for("[[rewrite]]\nsource_topic = \"x/#\"\nre = \"^x$\"\ndest_topic = \"y/$1\"\n");
    assert!(bad_group.contains("rewrite.dest_topic"), "{bad_group}");
    let bad_action = error_for(
        "[[rewrite]]\naction = \"both\"\nsource_topic = \"x\"\nre = \"x\"\ndest_topic = \"y\"\n",
    );
    assert!(bad_action.contains("rewrite.action"), "{bad_action}");
    let missing = error_for("[[rewrite]]\nsource_topic = \"x\"\nre = \"x\"\n");
    assert!(missing.contains("rewrite.dest_topic"), "{missing}");
}
