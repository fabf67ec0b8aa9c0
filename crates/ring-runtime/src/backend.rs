//! The interface between the backend-independent shard logic and an I/O backend (io_uring or
//! epoll); the start-up choice between them is `backend_select.rs`.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use bytes::Bytes;

use crate::config::RuntimeConfig;
use crate::conn::{Conn, ConnTable};
use crate::ctx::ShardStats;
use crate::datagram::{DatagramStats, OutQueue};
use crate::error::RuntimeError;
use crate::fence::FenceSide;
use crate::ids::ConnId;
use crate::sys::eventfd::EventFd;
use crate::sys::udp::Received;

/// A datagram a backend received on endpoint `endpoint`'s socket.
pub(crate) struct InboundDatagram {
    pub(crate) endpoint: usize,
    pub(crate) received: Received,
}

/// Something that happened on the shard's sockets, for the shard to act on.
pub(crate) enum Event {
    /// A listener accepted a connection.
    Accepted { stream: TcpStream, peer: SocketAddr },
    /// Bytes arrived (already copied out of the receive buffer).
    Data { conn: ConnId, data: Bytes },
    /// The peer's FIN arrived.
    Eof { conn: ConnId },
    /// A read or write failed.
    Failed { conn: ConnId, error: io::Error },
    /// An outbound connect finished.
    Connected {
        conn: ConnId,
        result: io::Result<()>,
    },
    /// The socket became writable again after a short write (epoll).
    Writable { conn: ConnId },
    /// The shard's eventfd fired (mailbox or shutdown).
    Wake,
    /// An accept failed for want of descriptors or memory ([`accept_refused`]); the backend
    /// has stopped accepting on that listener until [`Backend::resume_accepting`].
    AcceptRefused { error: io::Error },
}

/// Whether an accept error means the process or system ran out of descriptors or memory
/// (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`): retrying at once cannot succeed and would spin.
pub(crate) fn accept_refused(errno: i32) -> bool {
    matches!(
        errno,
        libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
    )
}

/// Everything a shard needs from its I/O backend. Write completions and per-connection
/// operation accounting are applied by the backend to the [`ConnTable`] directly (marking the
/// connection dirty); everything that needs the handler comes back as an [`Event`].
pub(crate) trait Backend: Sized {
    /// Sets the backend up on the shard's thread; `wake` is the shard's mailbox eventfd,
    /// `udp[i]` the socket of datagram endpoint `i` (receiving starts at once).
    fn new(
        config: &RuntimeConfig,
        listeners: Vec<TcpListener>,
        udp: Vec<UdpSocket>,
        wake: EventFd,
    ) -> Result<Self, RuntimeError>;

    /// Moves the datagrams received during the last [`Backend::wait`] to `into`.
    fn take_datagrams(&mut self, into: &mut Vec<InboundDatagram>);

    /// Hands datagrams from the front of `out` to endpoint `endpoint`'s socket, as many as it
    /// takes now (the rest wait; the wait returns when the socket takes more). Counts what
    /// was sent and what the kernel refused (dropped) in `stats`.
    fn send_datagrams(&mut self, endpoint: usize, out: &mut OutQueue, stats: &mut DatagramStats);

    /// Stops receiving datagrams and closes the sockets once no operation uses them (the
    /// shard is shutting down and its virtual connections are gone). Idempotent.
    fn close_datagrams(&mut self);

    /// Submits pending work, waits up to `timeout` (`None`: until something happens) and
    /// appends the results to `events`. With `fence` (the shard's place on the input-fence
    /// board, `fence.rs`) the look is a *drain* when another shard wants one and blocks only
    /// flagged asleep; returns the number of the drain the events came from (`None` when this
    /// look was not one, and always without `fence`).
    fn wait(
        &mut self,
        conns: &mut ConnTable,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
        fence: Option<&FenceSide<'_>>,
    ) -> Result<Option<u64>, RuntimeError>;

    /// Starts receiving on an open connection.
    fn start_read(&mut self, id: ConnId, conn: &mut Conn) -> io::Result<()>;

    /// Stops receiving (the connection is closing).
    fn stop_read(&mut self, id: ConnId, conn: &mut Conn);

    /// Stops receiving while `conn.io.read_paused` holds, without losing anything: bytes already
    /// received still come back as [`Event::Data`] (the shard keeps them for the resume), and
    /// no receive is armed again until the shard calls [`Backend::start_read`]. The socket is
    /// left unread, so TCP flow control pushes back on the peer.
    fn pause_read(&mut self, id: ConnId, conn: &mut Conn);

    /// Sends the queued frames (one writev/sendmsg); `conn.io.writing` is set while it is pending.
    fn start_write(&mut self, id: ConnId, conn: &mut Conn) -> io::Result<()>;

    /// Cancels a pending write or connect (abort).
    fn cancel_output(&mut self, id: ConnId, conn: &mut Conn);

    /// Starts the outbound connect of `conn` to `addr`.
    fn start_connect(&mut self, id: ConnId, conn: &mut Conn, addr: SocketAddr) -> io::Result<()>;

    /// The connection is being released; its descriptor is closed right after.
    fn release(&mut self, id: ConnId, conn: &mut Conn);

    /// Stops accepting and closes the listeners once no operation uses them.
    fn stop_accepting(&mut self);

    /// Accepts again on every listener paused by an [`Event::AcceptRefused`] (unless
    /// accepting has stopped).
    fn resume_accepting(&mut self) -> Result<(), RuntimeError>;

    /// Whether no operation is in flight besides the wake-up read.
    fn is_idle(&self) -> bool;

    /// Adds the counters only the backend sees to `stats`.
    fn add_stats(&mut self, stats: &mut ShardStats) {
        let _ = stats;
    }

    /// Shrinks the buffers a burst grew to what they hold and hands back the pages of idle
    /// receive buffers (the shard has gone quiet).
    fn shrink_spare(&mut self) {}

    /// Cancels everything still in flight and waits for the completions, so no buffer is freed
    /// while the kernel may write to it. Called once, before the shard exits.
    fn quiesce(&mut self, conns: &mut ConnTable) -> Result<(), RuntimeError>;
}

/// The sooner of two optional deadlines or timeouts (`None`: none).
pub(crate) fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The wait timeout a backend uses: zero while it holds work of its own from an earlier wait.
pub(crate) fn timeout_unless_pending(timeout: Option<Duration>, pending: bool) -> Option<Duration> {
    if pending {
        Some(Duration::ZERO)
    } else {
        timeout
    }
}
