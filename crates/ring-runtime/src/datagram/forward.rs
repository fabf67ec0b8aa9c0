//! Datagrams handed between shards: one bounded lock-free queue per destination shard
//! (`RuntimeConfig::datagram_forward_queue`), filled by any shard's driver, drained by the
//! owner at the start of its datagram work each turn. A full queue drops the datagram (the
//! sender counts it): UDP may lose datagrams, and QUIC recovers.

use crossbeam_queue::ArrayQueue;

/// A datagram on its way to the shard that owns its connection.
#[derive(Debug)]
pub(crate) struct ForwardedDatagram {
    /// The endpoint (index in the config's `datagram_listen`) it arrived on.
    pub(crate) endpoint: usize,
    pub(crate) datagram: super::Datagram,
}

/// Every shard's inbox of forwarded datagrams.
pub(crate) struct ForwardInboxes {
    inboxes: Vec<ArrayQueue<ForwardedDatagram>>,
}

impl ForwardInboxes {
    pub(crate) fn new(shards: usize, capacity: usize) -> Self {
        Self {
            inboxes: (0..shards).map(|_| ArrayQueue::new(capacity)).collect(),
        }
    }

    /// For a runtime without datagram endpoints: no inbox (nothing allocated; every push is
    /// refused, every inbox is empty).
    pub(crate) fn none() -> Self {
        Self {
            inboxes: Vec::new(),
        }
    }

    /// Queues `datagram` for `shard`; gives it back when that inbox is full (or the shard
    /// does not exist).
    pub(crate) fn push(
        &self,
        shard: usize,
        datagram: ForwardedDatagram,
    ) -> Result<(), ForwardedDatagram> {
        match self.inboxes.get(shard) {
            Some(inbox) => inbox.push(datagram),
            None => Err(datagram),
        }
    }

    pub(crate) fn pop(&self, shard: usize) -> Option<ForwardedDatagram> {
        self.inboxes.get(shard)?.pop()
    }

    pub(crate) fn is_empty(&self, shard: usize) -> bool {
        self.inboxes.get(shard).is_none_or(ArrayQueue::is_empty)
    }
}

/// The queue alone.
#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use bytes::Bytes;

    use super::*;

    fn datagram(port: u16) -> ForwardedDatagram {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        ForwardedDatagram {
            endpoint: 0,
            datagram: super::super::Datagram {
                peer: addr,
                local: addr,
                data: Bytes::from_static(b"x"),
                segment_size: None,
            },
        }
    }

    #[test]
    fn a_full_inbox_gives_the_datagram_back() {
        let inboxes = ForwardInboxes::new(2, 2);
        assert!(inboxes.push(1, datagram(1)).is_ok());
        assert!(inboxes.push(1, datagram(2)).is_ok());
        let refused = inboxes.push(1, datagram(3)).unwrap_err();
        assert_eq!(refused.datagram.peer.port(), 3);
        assert!(inboxes.push(5, datagram(4)).is_err(), "no such shard");
        assert!(inboxes.is_empty(0));
        assert_eq!(inboxes.pop(1).unwrap().datagram.peer.port(), 1);
    }
}
