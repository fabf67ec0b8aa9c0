//! [`FilterMatcher`]: a topic filter kept for matching every PUBLISH against it (a rewrite
//! rule's source, a webhook's topics), where nearly every topic does not match. The bytes
//! before the filter's first wildcard (and before the `/` of a last-level `#`) are compared
//! first, so a topic outside them is refused with one prefix comparison, before any level is
//! split.

use crate::filter::TopicFilter;

/// A [`TopicFilter`] with the length of the literal start every matching topic has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterMatcher {
    filter: TopicFilter,
    literal: usize,
}

impl FilterMatcher {
    /// Prepares `filter` for matching.
    pub fn new(filter: TopicFilter) -> Self {
        let bytes = filter.as_bytes();
        let literal = match bytes.iter().position(|&b| b == b'+' || b == b'#') {
            // `a/#` also matches `a`: the `/` before a `#` is not required.
            Some(at) if bytes[at] == b'#' => at.saturating_sub(1),
            Some(at) => at,
            None => bytes.len(),
        };
        Self { filter, literal }
    }

    /// The filter.
    pub fn filter(&self) -> &TopicFilter {
        &self.filter
    }

    /// Whether the valid topic name `topic` matches (as [`TopicFilter::matches_bytes`]).
    #[inline]
    pub fn matches_bytes(&self, topic: &[u8]) -> bool {
        let bytes = self.filter.as_bytes();
        // The first byte alone refuses most topics, without a call to compare the rest.
        if self.literal > 0 && topic.first() != bytes.first() {
            return false;
        }
        if !topic.starts_with(&bytes[..self.literal]) {
            return false;
        }
        if self.literal == bytes.len() {
            return topic.len() == bytes.len();
        }
        self.filter.matches_bytes(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::TopicLimits;

    fn matcher(text: &str) -> FilterMatcher {
        FilterMatcher::new(TopicFilter::new(text, &TopicLimits::default()).expect("valid"))
    }

    #[test]
    fn it_agrees_with_the_filter_on_every_pair() {
        let filters = [
            "#", "+", "a", "a/b", "a/+", "a/#", "+/b", "+/+", "a/+/c", "a/b/#", "$SYS/#", "$SYS/+",
            "+/#", "ab", "a/bc", "/", "/+", "+/", "never/#",
        ];
        let topics = [
            "a", "a/b", "a/c", "a/b/c", "ab", "a/bc", "b", "$SYS/x", "$SYS", "/", "/a", "a/",
            "never", "never/x", "neverx/y", "a/b/c/d",
        ];
        for filter in filters {
            let prepared = matcher(filter);
            for topic in topics {
                assert_eq!(
                    prepared.matches_bytes(topic.as_bytes()),
                    prepared.filter().matches_text(topic),
                    "{filter} against {topic}"
                );
            }
        }
    }

    #[test]
    fn a_literal_start_refuses_other_topics_and_a_literal_filter_matches_one() {
        assert!(!matcher("never/#").matches_bytes(b"p2p/17"));
        assert!(matcher("never/#").matches_bytes(b"never/x/y"));
        assert!(matcher("a/b").matches_bytes(b"a/b"));
        assert!(!matcher("a/b").matches_bytes(b"a/b/c"));
        assert!(!matcher("a/b").matches_bytes(b"a/"));
    }
}
