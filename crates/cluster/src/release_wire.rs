//! The wire format of a release reply between nodes (docs/cluster.md, "Sessions across
//! nodes"): `[0]` no session or `[1][snapshot]`, and a header naming where the releasing
//! node's unfinished follow-up starts. Both sides use it: `owners.rs` (the claiming node) and
//! `release_serving.rs` (the owner).

use std::time::{Duration, SystemTime};

use bytes::Bytes;

/// The header of a release reply that names where the releasing node's follow-up of the
/// session, not done yet, starts (Unix milliseconds): the claiming node's follow-up reads from
/// there at the latest (`follow_released`).
pub(super) const FOLLOW_FROM_HEADER: &str = "Ringmq-Follow-From";

/// Where a release reply says the releasing node's unfinished follow-up starts (its
/// [`FOLLOW_FROM_HEADER`]; `None`: none, or a node of an earlier version).
pub(super) fn follow_from_of(reply: &async_nats::Message) -> Option<SystemTime> {
    let value = reply.headers.as_ref()?.get(FOLLOW_FROM_HEADER)?;
    let millis: u64 = value.as_str().parse().ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(millis))
}

/// `at` in Unix milliseconds (0 before 1970).
pub(super) fn unix_millis(at: SystemTime) -> u64 {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// A release reply: `[0]` no session, `[1][snapshot]` the session's state.
pub(super) fn decode_release(payload: &Bytes) -> Option<Bytes> {
    match payload.first() {
        Some(1) => Some(payload.slice(1..)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_reply_names_where_an_unfinished_follow_up_starts() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_595_012_229);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(FOLLOW_FROM_HEADER, unix_millis(at).to_string().as_str());
        let reply = |headers| async_nats::Message {
            subject: "_INBOX.x".into(),
            reply: None,
            payload: Bytes::from_static(b"\x01"),
            headers,
            status: None,
            description: None,
            length: 0,
        };
        assert_eq!(follow_from_of(&reply(Some(headers))), Some(at));
        assert_eq!(
            follow_from_of(&reply(None)),
            None,
            "an earlier version's reply"
        );
    }

    #[test]
    fn release_replies_decode() {
        assert_eq!(decode_release(&Bytes::from_static(b"\x00")), None);
        assert_eq!(
            decode_release(&Bytes::from_static(b"\x01abc")),
            Some(Bytes::from_static(b"abc"))
        );
    }
}
