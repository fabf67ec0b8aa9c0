//! Retained messages in topic order from a saved position: [`RetainedStore::next_after`] finds
//! the next message matching a filter after a topic, scanning only the topics under the
//! filter's literal prefix and at most a given number of them. A delivery that keeps just the
//! last topic it reached resumes where it stopped, whatever was stored or cleared meanwhile.

use std::ops::Bound;

use crate::filter::TopicFilter;
use crate::retained::RetainedStore;
use crate::topic::TopicName;

/// What [`RetainedStore::next_after`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum RetainedStep<'a, V> {
    /// The next matching message.
    Found(&'a TopicName, &'a V),
    /// The scan limit ran out without a match: resume after this topic.
    Scanned(&'a TopicName),
    /// No matching topic follows.
    End,
}

impl<V> RetainedStore<V> {
    /// The first retained message after topic `after` (from the start when `None`), in byte
    /// order of the topic names, whose topic matches `filter` (MQTT 4.7, `$` rule included).
    /// Looks at no more than `scan_limit` topics (at least one): the topics under the filter's
    /// literal prefix, so a filter such as `sensors/+/temp` never visits other branches.
    pub fn next_after<'a>(
        &'a self,
        filter: &TopicFilter,
        after: Option<&[u8]>,
        scan_limit: usize,
    ) -> RetainedStep<'a, V> {
        let prefix = literal_prefix(filter.as_bytes());
        let start = after.map_or(Bound::Included(prefix), Bound::Excluded);
        let mut last = None;
        let range = self.in_order.range::<[u8], _>((start, Bound::Unbounded));
        for (key, id) in range.take(scan_limit.max(1)) {
            if !key.starts_with(prefix) {
                return RetainedStep::End;
            }
            let Some((topic, value)) = self.entry_at(*id) else {
                continue;
            };
            if filter.matches(topic) {
                return RetainedStep::Found(topic, value);
            }
            last = Some(topic);
        }
        last.map_or(RetainedStep::End, RetainedStep::Scanned)
    }
}

/// The bytes every matching topic starts with: the filter's levels before its first wildcard,
/// without the separator before it (`a/#` also matches `a`).
fn literal_prefix(filter: &[u8]) -> &[u8] {
    let mut end: usize = 0;
    for (index, level) in filter.split(|b| *b == b'/').enumerate() {
        if level == b"+" || level == b"#" {
            return &filter[..end.saturating_sub(usize::from(index > 0))];
        }
        end += level.len() + 1;
    }
    filter
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::TopicLimits;

    fn topic(text: &str) -> TopicName {
        TopicName::new(text, &TopicLimits::default()).expect("a topic")
    }

    fn filter(text: &str) -> TopicFilter {
        TopicFilter::new(text, &TopicLimits::default()).expect("a filter")
    }

    fn store(topics: &[&str]) -> RetainedStore<u32> {
        let mut store = RetainedStore::new();
        for (n, t) in topics.iter().enumerate() {
            store.store(&topic(t), n as u32, 1);
        }
        store
    }

    /// Every match of `filter`, walked one step at a time from the start.
    fn walk(store: &RetainedStore<u32>, filter: &TopicFilter, scan_limit: usize) -> Vec<String> {
        let mut after: Option<Vec<u8>> = None;
        let mut found = Vec::new();
        loop {
            match store.next_after(filter, after.as_deref(), scan_limit) {
                RetainedStep::Found(t, _) => {
                    found.push(t.as_str().to_owned());
                    after = Some(t.as_bytes().to_vec());
                }
                RetainedStep::Scanned(t) => after = Some(t.as_bytes().to_vec()),
                RetainedStep::End => return found,
            }
        }
    }

    #[test]
    fn prefixes() {
        assert_eq!(literal_prefix(b"#"), b"");
        assert_eq!(literal_prefix(b"+/x"), b"");
        assert_eq!(literal_prefix(b"a/#"), b"a");
        assert_eq!(literal_prefix(b"a/b/+/c"), b"a/b");
        assert_eq!(literal_prefix(b"a/b"), b"a/b");
    }

    #[test]
    fn walks_every_match_once_in_order() {
        let s = store(&["b/2", "a", "a/x", "a/y/z", "ab", "$SYS/q", "c/x"]);
        assert_eq!(
            walk(&s, &filter("#"), 1),
            ["a", "a/x", "a/y/z", "ab", "b/2", "c/x"]
        );
        assert_eq!(walk(&s, &filter("a/#"), 1), ["a", "a/x", "a/y/z"]);
        assert_eq!(walk(&s, &filter("+/x"), 1), ["a/x", "c/x"]);
        assert_eq!(walk(&s, &filter("+/x"), 100), ["a/x", "c/x"]);
        assert_eq!(walk(&s, &filter("$SYS/#"), 2), ["$SYS/q"]);
        assert!(walk(&s, &filter("d/#"), 3).is_empty());
    }

    #[test]
    fn resumes_after_changes() {
        let mut s = store(&["t/1", "t/2", "t/3"]);
        let f = filter("t/#");
        let RetainedStep::Found(first, _) = s.next_after(&f, None, 8) else {
            panic!("a first match");
        };
        let after = first.as_bytes().to_vec();
        s.remove(&topic("t/1"));
        s.remove(&topic("t/2"));
        s.store(&topic("t/0"), 9, 1);
        let RetainedStep::Found(next, value) = s.next_after(&f, Some(&after), 8) else {
            panic!("a next match");
        };
        assert_eq!((next.as_str(), *value), ("t/3", 2));
        assert_eq!(s.in_order.len(), s.len());
    }
}
