//! [`DriverIo`]: what a [`super::DatagramDriver`] can do from inside a call. Like
//! [`crate::ShardCtx`], every call records intent: datagrams join the endpoint's send queue,
//! handler callbacks wait in a list the shard runs right after the driver returns.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;

use super::endpoint::{OutDatagram, OutQueue};
use super::forward::{ForwardInboxes, ForwardedDatagram};
use super::virtual_conn::{VirtualConn, VirtualConns};
use super::{Datagram, DatagramStats};
use crate::close_reason::CloseReason;
use crate::conn::{Conn, ConnTable, Phase};
use crate::ids::{ConnId, ShardId};

/// What the driver asked of the handler, run by the shard after the driver call.
#[derive(Debug)]
pub(crate) enum DriverEvent {
    /// A connection opened: `on_accept`.
    Opened { conn: ConnId, peer: SocketAddr },
    /// An outbound connect ended: `on_connected` (on failure, after the release).
    Connected {
        conn: ConnId,
        result: std::io::Result<()>,
    },
    /// Stream bytes: `on_data` (held while the handler pauses reading).
    Data { conn: ConnId, data: Bytes },
    /// The peer ended its stream: `on_read_closed`.
    Finished { conn: ConnId },
    /// The connection is gone on the driver's side: release it, then `on_closed`.
    Closed { conn: ConnId, reason: CloseReason },
}

/// The shard's parts a driver call may touch, borrowed for the call.
pub(crate) struct DriverParts<'a> {
    pub(crate) endpoint: usize,
    pub(crate) local: SocketAddr,
    pub(crate) gso: bool,
    pub(crate) now: Instant,
    pub(crate) shard: ShardId,
    pub(crate) shard_count: usize,
    pub(crate) conns: &'a mut ConnTable,
    pub(crate) virtuals: &'a mut VirtualConns,
    pub(crate) named_peers: &'a mut HashMap<ConnId, SocketAddr>,
    pub(crate) out: &'a mut OutQueue,
    /// `Some(deadline)` once the driver set (or, with `Some(None)`, cleared) its deadline.
    pub(crate) deadline: &'a mut Option<Option<Instant>>,
    pub(crate) events: &'a mut Vec<DriverEvent>,
    pub(crate) forward: &'a ForwardInboxes,
    /// Shards this shard forwarded to since its last wake-ups went out.
    pub(crate) forwarded_to: &'a mut Vec<bool>,
    pub(crate) stats: &'a mut DatagramStats,
    /// The shard is shutting down: no new connections.
    pub(crate) shutting_down: bool,
}

/// The driver's handle on its shard during one call (see the module documentation).
pub struct DriverIo<'a> {
    parts: DriverParts<'a>,
}

impl<'a> DriverIo<'a> {
    pub(crate) fn new(parts: DriverParts<'a>) -> Self {
        Self { parts }
    }

    /// This turn's time (the shard's clock, read once per turn).
    pub fn now(&self) -> Instant {
        self.parts.now
    }

    /// The shard the driver runs on.
    pub fn shard(&self) -> ShardId {
        self.parts.shard
    }

    /// Shards in the runtime.
    pub fn shard_count(&self) -> usize {
        self.parts.shard_count
    }

    /// The endpoint's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.parts.local
    }

    /// Queues one datagram to `peer`. `false` when the endpoint's send queue is full
    /// (`RuntimeConfig::datagram_send_queue`): the datagram is dropped and counted.
    pub fn send(&mut self, peer: SocketAddr, data: Bytes) -> bool {
        self.queue(OutDatagram {
            peer,
            data,
            segment_size: None,
        })
    }

    /// Queues a train of datagrams of `segment_size` bytes each (the last may be shorter),
    /// back to back in `data`, to `peer`: one UDP GSO send where the socket takes them
    /// ([`super::DriverSetup::gso`]), otherwise one datagram each. `false` when the send queue
    /// was full (what did not fit is dropped and counted).
    pub fn send_segments(&mut self, peer: SocketAddr, data: Bytes, segment_size: u16) -> bool {
        let size = usize::from(segment_size.max(1));
        if self.parts.gso && data.len() > size {
            return self.queue(OutDatagram {
                peer,
                data,
                segment_size: Some(segment_size),
            });
        }
        let mut all_queued = true;
        for start in (0..data.len()).step_by(size) {
            let end = (start + size).min(data.len());
            all_queued &= self.send(peer, data.slice(start..end));
        }
        all_queued
    }

    fn queue(&mut self, datagram: OutDatagram) -> bool {
        let queued = self.parts.out.push(datagram).is_ok();
        if !queued {
            self.parts.stats.send_queue_full += 1;
        }
        queued
    }

    /// Opens a virtual connection with `peer`: the runtime gives it a [`ConnId`] and calls
    /// `Handler::on_accept` after this driver call. `None` once the shard is shutting down
    /// (its listeners stopped accepting too): the driver refuses the peer.
    pub fn open(&mut self, peer: SocketAddr) -> Option<ConnId> {
        let parts = &mut self.parts;
        if parts.shutting_down {
            return None;
        }
        let conn = parts.conns.insert(Conn::virtual_conn());
        let record = VirtualConn::new(parts.endpoint, peer, parts.local);
        parts.virtuals.insert(conn, record);
        parts.stats.opened += 1;
        parts.events.push(DriverEvent::Opened { conn, peer });
        Some(conn)
    }

    /// The outcome of an outbound connect ([`super::DatagramDriver::on_connect`]): `Ok` once
    /// the connection carries bytes (the handler's `on_connected(Ok)`; its queued frames come
    /// to [`super::DatagramDriver::on_send`] next), or `Err`: the driver forgets `conn`, the
    /// runtime releases it and the handler gets `on_connected(Err)` (no `on_closed`). Ignored
    /// for a connection that is not connecting.
    pub fn connected(&mut self, conn: ConnId, result: std::io::Result<()>) {
        if self.connecting(conn) {
            self.parts
                .events
                .push(DriverEvent::Connected { conn, result });
        }
    }

    /// Whether `conn` is this endpoint's and its outbound connect has not ended.
    fn connecting(&mut self, conn: ConnId) -> bool {
        self.owns(conn)
            && self
                .parts
                .conns
                .get(conn)
                .is_some_and(|record| record.phase == Phase::Connecting)
    }

    /// Stream bytes for the handler (`on_data`), in order.
    pub fn deliver(&mut self, conn: ConnId, data: Bytes) {
        if !data.is_empty() && self.owns(conn) {
            self.parts.events.push(DriverEvent::Data { conn, data });
        }
    }

    /// The peer ended its stream (`on_read_closed`).
    pub fn finished(&mut self, conn: ConnId) {
        if self.owns(conn) {
            self.parts.events.push(DriverEvent::Finished { conn });
        }
    }

    /// `conn` is gone on the driver's side (the peer closed it, it timed out, or a graceful
    /// close the handler asked for is done): the runtime releases it and calls `on_closed`
    /// with `reason` (unless the handler's own close gave one). The driver forgets it. Like a
    /// TCP reset, this drops what the handler has not taken yet (bytes held while it paused
    /// reading, frames it queued): for an orderly end, call [`Self::finished`] and let the
    /// handler close. For a connection still connecting this is [`Self::connected`] with an
    /// error.
    pub fn closed(&mut self, conn: ConnId, reason: CloseReason) {
        if self.connecting(conn) {
            let kind = match reason {
                CloseReason::Error { kind } => kind,
                _ => std::io::ErrorKind::ConnectionAborted,
            };
            self.connected(conn, Err(kind.into()));
        } else if self.owns(conn) {
            self.parts.events.push(DriverEvent::Closed { conn, reason });
        }
    }

    /// `conn`'s peer now sends from `peer` (an address change): what
    /// [`crate::ShardCtx::peer_addr`] answers from now on.
    pub fn set_peer(&mut self, conn: ConnId, peer: SocketAddr) {
        if let Some(record) = self.owned_mut(conn) {
            record.peer = peer;
            self.parts.named_peers.remove(&conn);
        }
    }

    /// Who the transport says `conn`'s peer is (what [`crate::ShardCtx::peer_identity`]
    /// answers): set it before the driver call that opened `conn` returns, so the handler
    /// has it from its first byte.
    pub fn set_identity(&mut self, conn: ConnId, identity: super::PeerIdentity) {
        if self.owns(conn) {
            self.parts.virtuals.set_identity(conn, identity);
        }
    }

    /// Bytes the driver holds for `conn` and has not sent yet (counted by
    /// [`crate::ShardCtx::queued_bytes`]).
    pub fn set_unsent(&mut self, conn: ConnId, bytes: usize) {
        if let Some(record) = self.owned_mut(conn) {
            record.unsent = bytes;
        }
    }

    /// Calls [`super::DatagramDriver::on_timeout`] at `deadline` (rounded up to the timer
    /// tick); `None` clears it. Replaces the previous deadline.
    pub fn set_deadline(&mut self, deadline: Option<Instant>) {
        *self.parts.deadline = Some(deadline);
    }

    /// Hands `datagram` to `shard`'s driver of this endpoint (it belongs to a connection that
    /// shard owns). `false` when that shard's forward queue is full, or `shard` is this one
    /// or none: dropped and counted.
    pub fn forward(&mut self, shard: ShardId, datagram: Datagram) -> bool {
        let parts = &mut self.parts;
        if shard == parts.shard {
            parts.stats.forward_dropped += 1;
            return false;
        }
        let forwarded = ForwardedDatagram {
            endpoint: parts.endpoint,
            datagram,
        };
        if parts.forward.push(shard.index(), forwarded).is_err() {
            parts.stats.forward_dropped += 1;
            return false;
        }
        parts.stats.forwarded += 1;
        if let Some(wake) = parts.forwarded_to.get_mut(shard.index()) {
            *wake = true;
        }
        true
    }

    /// The record of a virtual connection of this endpoint that the driver has not yet
    /// reported closed.
    fn owned_mut(&mut self, conn: ConnId) -> Option<&mut VirtualConn> {
        let endpoint = self.parts.endpoint;
        self.parts
            .virtuals
            .get_mut(conn)
            .filter(|record| record.endpoint == endpoint && !record.driver_closed)
    }

    fn owns(&mut self, conn: ConnId) -> bool {
        self.owned_mut(conn).is_some()
    }
}
