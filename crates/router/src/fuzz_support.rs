//! The body of the topic-parsing fuzz target (wired into `fuzz/` by the workspace). Not API.

use bytes::Bytes;

use crate::filter::SubscriptionFilter;
use crate::topic::{TopicLimits, TopicName};

/// Parses `data` as a topic name and as a subscription filter, checks that what parses
/// round-trips and that matching the two never panics.
pub fn parse_any(data: &[u8]) {
    let limits = TopicLimits::default();
    let bytes = Bytes::copy_from_slice(data);
    let name = TopicName::from_bytes(bytes.clone(), &limits).ok();
    let filter = SubscriptionFilter::from_bytes(bytes, &limits).ok();
    if let Some(name) = &name {
        assert_eq!(name.as_bytes(), data, "a name keeps its bytes");
        assert_eq!(
            name.levels().count(),
            name.as_str().matches('/').count() + 1
        );
    }
    if let Some(filter) = &filter {
        assert_eq!(filter.as_str().as_bytes(), data, "a filter keeps its bytes");
        if let Some(name) = &name {
            let plain = filter.topic_filter();
            assert!(
                !matches!(filter, SubscriptionFilter::Plain(_)) || plain.matches(name),
                "a valid name is a filter matching itself"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_any;

    #[test]
    fn parse_any_accepts_every_kind_of_input() {
        for input in [
            &b"a/b"[..],
            b"a/+/#",
            b"$share/g/a/#",
            b"$share//x",
            b"\xff\xfe",
            b"",
            b"a\0b",
            b"$SYS/x",
        ] {
            parse_any(input);
        }
    }
}
