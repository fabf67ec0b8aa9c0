//! Datagram endpoints and virtual connections: the seam a datagram transport (QUIC) plugs into.
//!
//! Each configured UDP address ([`DatagramListen`]) gets one `SO_REUSEPORT` socket per shard and,
//! on every shard, one [`DatagramDriver`] built on the shard's thread by the listen entry's
//! factory. The runtime owns the socket: it receives datagrams (through the backend: io_uring
//! `RECVMSG` or epoll `recvmsg`) and hands them to the driver; the driver owns the protocol
//! state. What the driver decides goes back through [`DriverIo`]: datagrams to send (queued per
//! endpoint, bounded, sent by the backend after the turn), connections opened and closed,
//! stream bytes for the handler, deadlines, address changes, and datagrams that belong to
//! another shard (forwarded through a bounded per-shard queue, counted when dropped).
//!
//! A connection the driver opens is a *virtual connection*: a [`ConnId`] like a TCP one, but
//! without a descriptor. The handler sees `on_accept`, `on_data`, `on_read_closed` and
//! `on_closed` as for TCP and uses the same [`crate::ShardCtx`] calls; where the shard would
//! write a TCP connection's queued frames, it hands a virtual connection's frames to its
//! driver ([`DatagramDriver::on_send`]).
//!
//! Outbound: [`crate::ShardCtx::connect_datagram`] gives a virtual connection its id at once
//! and, in the turn's apply step, asks the endpoint's driver to connect
//! ([`DatagramDriver::on_connect`]); the driver reports the outcome with
//! [`DriverIo::connected`] and the handler gets `on_connected`, as for an outbound TCP
//! connect. A client endpoint ([`crate::RuntimeConfig::datagram_clients`]) has a socket of its
//! own on every shard (no `SO_REUSEPORT`), so the replies reach the shard that connected.
//!
//! Ownership: a virtual connection belongs to the shard (and the driver) that opened it, for
//! life. The driver never sees another shard's state; the runtime never looks inside a
//! datagram.

mod endpoint;
mod forward;
mod io;
mod virtual_conn;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use crate::ids::{ConnId, ShardId};

pub(crate) use endpoint::{Endpoint, OutDatagram, OutQueue, refuses_gso};
pub(crate) use forward::ForwardInboxes;
pub use io::DriverIo;
pub(crate) use io::{DriverEvent, DriverParts};
pub use virtual_conn::PeerIdentity;
pub(crate) use virtual_conn::{VirtualConn, VirtualConns};

/// A datagram as the driver receives it.
#[derive(Clone, Debug)]
pub struct Datagram {
    /// Who sent it.
    pub peer: SocketAddr,
    /// The address of the socket it arrived on (the endpoint's bound address).
    pub local: SocketAddr,
    /// The payload: one datagram, or with [`Self::segment_size`] several back to back.
    pub data: Bytes,
    /// With UDP GRO ([`crate::RuntimeConfig::datagram_gro`]): the kernel joined datagrams of
    /// this size (the last may be shorter) from one peer into `data`. `None`: one datagram.
    pub segment_size: Option<u16>,
}

impl Datagram {
    /// The datagrams inside `data`, split at [`Self::segment_size`].
    pub fn segments(&self) -> impl Iterator<Item = Bytes> + '_ {
        let size = self
            .segment_size
            .map_or(self.data.len(), usize::from)
            .max(1);
        (0..self.data.len())
            .step_by(size)
            .map(move |start| self.data.slice(start..(start + size).min(self.data.len())))
    }
}

/// How the handler asked a virtual connection to close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverClose {
    /// Send what the connection still holds, then close; report it with
    /// [`DriverIo::closed`] (the runtime aborts after `drain_timeout` otherwise).
    Graceful,
    /// Forget the connection now; the runtime has already released it (no report needed).
    Abort,
}

/// A datagram protocol on one shard's UDP socket (QUIC in the transport crate; a toy protocol
/// in the tests). Knows its connections by the [`ConnId`]s [`DriverIo::open`] returned.
///
/// Every method gets a [`DriverIo`] to answer with. The runtime calls them on the shard's
/// thread, never re-entrantly.
pub trait DatagramDriver: 'static {
    /// A datagram arrived on this shard's socket, or another shard forwarded it here.
    fn on_datagram(&mut self, io: &mut DriverIo<'_>, datagram: Datagram);

    /// The deadline set with [`DriverIo::set_deadline`] passed.
    fn on_timeout(&mut self, io: &mut DriverIo<'_>);

    /// The handler's queued bytes for `conn`, in order (one turn's, or several under write
    /// pacing). The driver turns them into datagrams; bytes it cannot send yet it keeps, and
    /// reports with [`DriverIo::set_unsent`] so that [`crate::ShardCtx::queued_bytes`] sees
    /// them.
    fn on_send(&mut self, io: &mut DriverIo<'_>, conn: ConnId, frames: &[Bytes]);

    /// The handler called [`crate::ShardCtx::shutdown_write`]: end the stream after the
    /// bytes given so far.
    fn on_finish(&mut self, io: &mut DriverIo<'_>, conn: ConnId) {
        let _ = (io, conn);
    }

    /// The handler paused (`true`) or resumed reading `conn`: stop (or go on) handing it bytes
    /// and granting the peer credit. Bytes delivered while paused are held by the runtime and
    /// handed over after the resume, so nothing is lost either way.
    fn on_read_paused(&mut self, io: &mut DriverIo<'_>, conn: ConnId, paused: bool) {
        let _ = (io, conn, paused);
    }

    /// The handler asked for an outbound connection to `peer`
    /// ([`crate::ShardCtx::connect_datagram`]): start it, and report the outcome with
    /// [`DriverIo::connected`] (in this call or a later one). Until then the connection
    /// carries no bytes; a close before it ends comes as [`Self::on_close`]. The default
    /// refuses (`Unsupported`): a server-only driver does not connect out.
    fn on_connect(&mut self, io: &mut DriverIo<'_>, conn: ConnId, peer: SocketAddr) {
        let _ = peer;
        let refused = std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this datagram endpoint does not connect out",
        );
        io.connected(conn, Err(refused));
    }

    /// The handler (or shutdown, or a drain timeout) closes `conn`.
    fn on_close(&mut self, io: &mut DriverIo<'_>, conn: ConnId, how: DriverClose);
}

/// What a driver factory learns about the endpoint it builds a driver for.
#[derive(Clone, Copy, Debug)]
pub struct DriverSetup {
    /// The shard the driver runs on.
    pub shard: ShardId,
    /// Shards in the runtime (for a driver that names the owning shard in its connection ids).
    pub shard_count: usize,
    /// The endpoint's address, port 0 resolved.
    pub local: SocketAddr,
    /// Whether sending with UDP GSO ([`DriverIo::send_segments`]) reaches the kernel as one
    /// datagram train; when `false` the runtime splits such sends into single datagrams.
    pub gso: bool,
}

/// Builds one shard's driver for a [`DatagramListen`] address, on the shard's thread.
pub type DriverFactory = Arc<dyn Fn(DriverSetup) -> Box<dyn DatagramDriver> + Send + Sync>;

/// A UDP address to serve (or, in [`crate::RuntimeConfig::datagram_clients`], to connect
/// from) and the driver factory for it.
#[derive(Clone)]
pub struct DatagramListen {
    /// The address. Listening: port 0 resolves once and every shard binds the same port. A
    /// client: every shard binds it on its own (port 0: each shard its own port).
    pub addr: SocketAddr,
    /// Called once per shard.
    pub driver: DriverFactory,
}

impl fmt::Debug for DatagramListen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatagramListen")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Counters of one shard's datagram endpoints, in [`crate::ShardStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DatagramStats {
    /// Datagrams received from the sockets (a GRO train counts once).
    pub received: u64,
    /// Datagrams handed to the kernel (a GSO train counts once).
    pub sent: u64,
    /// Datagrams dropped because the endpoint's send queue was full
    /// ([`crate::RuntimeConfig::datagram_send_queue`]).
    pub send_queue_full: u64,
    /// Sends the kernel refused (the datagram is dropped, as the network may).
    pub send_failed: u64,
    /// Datagrams handed to their owning shard.
    pub forwarded: u64,
    /// Datagrams for another shard dropped because its forward queue was full
    /// ([`crate::RuntimeConfig::datagram_forward_queue`]).
    pub forward_dropped: u64,
    /// Datagrams received from other shards.
    pub forwarded_in: u64,
    /// Virtual connections opened.
    pub opened: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_train_splits_at_its_segment_size() {
        let addr = SocketAddr::from(([127, 0, 0, 1], 1));
        let mut datagram = Datagram {
            peer: addr,
            local: addr,
            data: Bytes::from_static(b"aabbc"),
            segment_size: Some(2),
        };
        let parts: Vec<Bytes> = datagram.segments().collect();
        assert_eq!(parts, [&b"aa"[..], b"bb", b"c"]);
        datagram.segment_size = None;
        assert_eq!(datagram.segments().count(), 1);
        datagram.data = Bytes::new();
        assert_eq!(datagram.segments().count(), 0);
    }
}
