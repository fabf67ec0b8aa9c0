//! One shard's side of a datagram listen address: its driver, its bounded queue of datagrams
//! waiting for the socket, and the timer standing for the driver's deadline.

use std::collections::VecDeque;
use std::net::SocketAddr;

use bytes::Bytes;

use super::DatagramDriver;
use crate::ids::TimerId;

/// A datagram (or, with `segment_size`, a GSO train of them) waiting to be sent.
#[derive(Clone, Debug)]
pub(crate) struct OutDatagram {
    pub(crate) peer: SocketAddr,
    pub(crate) data: Bytes,
    /// UDP GSO: the kernel cuts `data` into datagrams of this size (the last may be shorter).
    pub(crate) segment_size: Option<u16>,
}

/// The send queue was full: the datagram was dropped (and counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendQueueFull;

/// Datagrams waiting for the socket, at most `capacity`.
pub(crate) struct OutQueue {
    queue: VecDeque<OutDatagram>,
    capacity: usize,
    /// The device refused a GSO train (`EIO`): trains are split from now on.
    gso_refused: bool,
}

/// Whether a failed send of a GSO train means the device cannot segment (`EIO`, as the
/// kernel's UDP send reports a device without checksum offload).
pub(crate) fn refuses_gso(errno: i32, datagram: &OutDatagram) -> bool {
    errno == libc::EIO && datagram.segment_size.is_some()
}

impl OutQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity,
            gso_refused: false,
        }
    }

    /// The device refused a train: this train and every later one leave datagram by datagram.
    pub(crate) fn refuse_gso(&mut self) {
        if !self.gso_refused {
            tracing::warn!(
                "the network device refused a UDP GSO send; sending datagrams one by one"
            );
        }
        self.gso_refused = true;
    }

    pub(crate) fn gso_refused(&self) -> bool {
        self.gso_refused
    }

    pub(crate) fn push(&mut self, datagram: OutDatagram) -> Result<(), SendQueueFull> {
        if self.queue.len() >= self.capacity {
            return Err(SendQueueFull);
        }
        self.queue.push_back(datagram);
        Ok(())
    }

    /// The next datagram; a train is split first once GSO was refused (the split may go
    /// over the capacity by the train's length: it was admitted as one entry).
    pub(crate) fn pop(&mut self) -> Option<OutDatagram> {
        let datagram = self.queue.pop_front()?;
        let Some(size) = datagram.segment_size.filter(|_| self.gso_refused) else {
            return Some(datagram);
        };
        let size = usize::from(size.max(1));
        let data = &datagram.data;
        for start in (0..data.len()).step_by(size).rev() {
            self.queue.push_front(OutDatagram {
                peer: datagram.peer,
                data: data.slice(start..(start + size).min(data.len())),
                segment_size: None,
            });
        }
        self.queue.pop_front()
    }

    /// Puts back a datagram the socket could not take yet (it goes first next time).
    pub(crate) fn push_front(&mut self, datagram: OutDatagram) {
        self.queue.push_front(datagram);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub(crate) fn shrink(&mut self) {
        self.queue.shrink_to_fit();
    }
}

/// One endpoint on one shard.
pub(crate) struct Endpoint {
    pub(crate) driver: Box<dyn DatagramDriver>,
    pub(crate) local: SocketAddr,
    /// The socket takes GSO trains (`UDP_SEGMENT`).
    pub(crate) gso: bool,
    pub(crate) out: OutQueue,
    /// The wheel timer standing for the driver's deadline.
    pub(crate) timer: Option<TimerId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_train_leaves_datagram_by_datagram() {
        let peer = SocketAddr::from(([127, 0, 0, 1], 9));
        let mut out = OutQueue::new(2);
        let train = OutDatagram {
            peer,
            data: Bytes::from_static(b"aabbc"),
            segment_size: Some(2),
        };
        out.push(train.clone()).unwrap();
        out.push(train.clone()).unwrap();
        assert!(out.push(train.clone()).is_err(), "bounded");
        assert_eq!(out.pop().unwrap().segment_size, Some(2), "GSO still on");
        assert!(refuses_gso(libc::EIO, &train));
        assert!(!refuses_gso(libc::EAGAIN, &train));
        out.refuse_gso();
        let parts: Vec<_> = std::iter::from_fn(|| out.pop()).collect();
        let data: Vec<&[u8]> = parts.iter().map(|d| &d.data[..]).collect();
        assert_eq!(data, [&b"aa"[..], b"bb", b"c"]);
        assert!(parts.iter().all(|d| d.segment_size.is_none()));
    }
}
