//! Helpers shared by the property tests: generators over a small alphabet (so that filters
//! overlap and `$` topics and empty levels are frequent) and the reference matcher.

use proptest::prelude::*;

/// The reference matcher: levels compared one by one, written independently of the router.
pub fn naive_matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let f: Vec<&str> = filter.split('/').collect();
    let t: Vec<&str> = topic.split('/').collect();
    for (i, fl) in f.iter().enumerate() {
        if *fl == "#" {
            return true;
        }
        match t.get(i) {
            Some(tl) if *fl == "+" || fl == tl => {}
            _ => return false,
        }
    }
    f.len() == t.len()
}

/// Topic names of 1 to 4 levels.
pub fn topic_text() -> impl Strategy<Value = String> {
    let level = prop::sample::select(vec!["a", "b", "", "$s", "c"]);
    prop::collection::vec(level, 1..5)
        .prop_map(|levels| levels.join("/"))
        .prop_filter("topics are non-empty", |t| !t.is_empty())
}

/// Plain topic filters of up to 4 levels, `+` anywhere and maybe a final `#`.
pub fn plain_filter_text() -> impl Strategy<Value = String> {
    let levels = prop::collection::vec(prop::sample::select(vec!["a", "b", "", "$s", "+"]), 0..4);
    (levels, any::<bool>()).prop_filter_map("filters are non-empty", |(mut levels, hash)| {
        if hash {
            levels.push("#");
        }
        let text = levels.join("/");
        (!text.is_empty()).then_some(text)
    })
}
