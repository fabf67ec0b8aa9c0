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
}

impl OutQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity,
        }
    }

    pub(crate) fn push(&mut self, datagram: OutDatagram) -> Result<(), SendQueueFull> {
        if self.queue.len() >= self.capacity {
            return Err(SendQueueFull);
        }
        self.queue.push_back(datagram);
        Ok(())
    }

    pub(crate) fn pop(&mut self) -> Option<OutDatagram> {
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
