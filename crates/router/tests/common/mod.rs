//! Helpers shared by the integration tests.

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
