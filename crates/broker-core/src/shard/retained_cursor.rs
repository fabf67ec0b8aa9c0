//! [`RetainedCursors`]: the retained messages still owed to new subscriptions, one
//! [`RetainedCursor`] per (connection, subscription) whose SUBACK went out. A cursor holds its
//! filter and the last topic it reached in the replica's retained index, never the messages:
//! O(1) memory each, at most one per subscription of the connection (a new SUBSCRIBE to the
//! same filter replaces it). `retained_delivery.rs` advances them as the connection drains.

use std::collections::VecDeque;

use bytes::Bytes;
use codec::{MqttStr, QoS, SubscriptionId};
use ring_runtime::ConnId;
use router::TopicFilter;

use super::FastMap;

/// Where one subscription's retained delivery stands.
#[derive(Debug)]
pub(super) struct RetainedCursor {
    /// The subscription's filter as the session keys it (the delivery ends once it is gone).
    pub(super) key: MqttStr,
    pub(super) filter: TopicFilter,
    /// The QoS granted: each copy goes at the lower of it and the message's.
    pub(super) granted: QoS,
    pub(super) id: Option<SubscriptionId>,
    /// The last topic reached (`None`: none yet), in byte order.
    pub(super) after: Option<Bytes>,
    /// When the delivery started (turn nanoseconds since the broker started): a message
    /// received later reached the subscription live and is not sent again as retained.
    pub(super) started_ns: u64,
}

impl RetainedCursor {
    /// Whether a message received at `received_ns` (0: read back from the store) came in
    /// after the delivery started.
    pub(super) fn is_newer(&self, received_ns: u64) -> bool {
        received_ns > self.started_ns
    }
}

/// The cursors of this shard's connections, oldest subscription first per connection.
#[derive(Debug, Default)]
pub(super) struct RetainedCursors {
    by_conn: FastMap<ConnId, VecDeque<RetainedCursor>>,
}

impl RetainedCursors {
    /// Whether no connection has retained messages owed (the common case: nothing to do).
    pub(super) fn is_empty(&self) -> bool {
        self.by_conn.is_empty()
    }

    /// Adds `cursor` behind `conn`'s others; one for the same filter starts over.
    pub(super) fn start(&mut self, conn: ConnId, cursor: RetainedCursor) {
        let cursors = self.by_conn.entry(conn).or_default();
        cursors.retain(|c| c.key != cursor.key);
        cursors.push_back(cursor);
    }

    /// Ends `conn`'s delivery for filter `key` (UNSUBSCRIBE).
    pub(super) fn stop(&mut self, conn: ConnId, key: &MqttStr) {
        if let Some(cursors) = self.by_conn.get_mut(&conn) {
            cursors.retain(|c| c.key != *key);
            if cursors.is_empty() {
                self.by_conn.remove(&conn);
            }
        }
    }

    /// Ends every delivery of `conn` (it closed).
    pub(super) fn forget(&mut self, conn: ConnId) {
        self.by_conn.remove(&conn);
    }

    /// Takes `conn`'s cursors out while they advance (what that sends cannot reach them).
    pub(super) fn take(&mut self, conn: ConnId) -> Option<VecDeque<RetainedCursor>> {
        self.by_conn.remove(&conn)
    }

    /// Puts back what [`Self::take`] took and did not finish, ahead of any started meanwhile.
    pub(super) fn put_back(&mut self, conn: ConnId, mut cursors: VecDeque<RetainedCursor>) {
        if let Some(started) = self.by_conn.remove(&conn) {
            for cursor in started {
                cursors.retain(|c| c.key != cursor.key);
                cursors.push_back(cursor);
            }
        }
        if !cursors.is_empty() {
            self.by_conn.insert(conn, cursors);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use router::TopicLimits;

    fn cursor(filter: &str, after: Option<&'static str>) -> RetainedCursor {
        RetainedCursor {
            key: MqttStr::try_from(filter).expect("a filter"),
            filter: TopicFilter::new(filter, &TopicLimits::default()).expect("a filter"),
            granted: QoS::AtMostOnce,
            id: None,
            after: after.map(|a| Bytes::from_static(a.as_bytes())),
            started_ns: 1,
        }
    }

    fn keys(cursors: &mut RetainedCursors, conn: ConnId) -> Vec<(String, Option<Bytes>)> {
        let taken = cursors.take(conn).unwrap_or_default();
        let keys = taken
            .iter()
            .map(|c| (c.key.as_str().to_owned(), c.after.clone()))
            .collect();
        cursors.put_back(conn, taken);
        keys
    }

    #[test]
    fn a_subscribe_to_the_same_filter_starts_over_and_unsubscribe_or_close_ends() {
        let (a, b) = (ConnId::from_u64(1), ConnId::from_u64(2));
        let mut cursors = RetainedCursors::default();
        cursors.start(a, cursor("x/#", Some("x/5")));
        cursors.start(a, cursor("y/#", None));
        cursors.start(a, cursor("x/#", None));
        cursors.start(b, cursor("x/#", None));
        let expected = vec![("y/#".to_owned(), None), ("x/#".to_owned(), None)];
        assert_eq!(keys(&mut cursors, a), expected);
        cursors.stop(a, &MqttStr::try_from("y/#").expect("a filter"));
        cursors.stop(a, &MqttStr::try_from("x/#").expect("a filter"));
        assert!(cursors.take(a).is_none(), "nothing left for a");
        cursors.forget(b);
        assert!(cursors.is_empty());
    }

    #[test]
    fn what_started_while_taken_out_goes_behind_and_replaces() {
        let conn = ConnId::from_u64(7);
        let mut cursors = RetainedCursors::default();
        cursors.start(conn, cursor("a", Some("a")));
        cursors.start(conn, cursor("b", Some("b")));
        let taken = cursors.take(conn).expect("two cursors");
        cursors.start(conn, cursor("b", None));
        cursors.start(conn, cursor("c", None));
        cursors.put_back(conn, taken);
        let expected = vec![
            ("a".to_owned(), Some(Bytes::from_static(b"a"))),
            ("b".to_owned(), None),
            ("c".to_owned(), None),
        ];
        assert_eq!(keys(&mut cursors, conn), expected);
    }
}
