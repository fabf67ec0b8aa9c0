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
