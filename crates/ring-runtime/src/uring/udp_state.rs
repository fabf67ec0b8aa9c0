//! The io_uring backend's datagram state: its sockets, their receive records and the
//! datagram buffer ring (the operations on them are `udp.rs`'s, the multishot receive's
//! `udp_multi.rs`'s).

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::IoUring;

use super::buf_ring::BufRing;
use crate::backend::InboundDatagram;
use crate::config::RuntimeConfig;
use crate::ctx::ShardStats;
use crate::datagram::DatagramStats;
use crate::error::RuntimeError;
use crate::sys::udp::{RecvSlot, SendSlot};

/// A `RECVMSG` in flight and the record it receives into.
pub(crate) struct UdpRecv {
    pub(crate) endpoint: usize,
    pub(crate) slot: Box<RecvSlot>,
}

/// A `SENDMSG` in flight and the record (with the datagram) it sends from.
pub(crate) struct UdpSend {
    pub(crate) endpoint: usize,
    pub(crate) slot: Box<SendSlot>,
}

/// The shard's datagram sockets and what is in flight on them. Dropped after the ring (the
/// backend's last field), so the buffer ring's registration ends before its memory goes.
pub(super) struct UringUdp {
    pub(super) sockets: Vec<UdpSocket>,
    /// Multishot receiving: the buffer ring and the header template the receives use (kept
    /// registered until the backend goes, also after a switch to single-shot).
    pub(super) multi: Option<MultiRecv>,
    /// Receives are multishot (else `recv_depth` single-shot ones per socket).
    pub(super) multishot: bool,
    pub(super) recv_size: usize,
    pub(super) recv_depth: usize,
    pub(super) max_sends: usize,
    pub(super) sends_in_flight: Vec<usize>,
    /// Endpoints whose device refused a GSO train, to tell their queue at the next send.
    pub(super) gso_refused: Vec<bool>,
    #[allow(
        clippy::vec_box,
        reason = "op table entries need the boxed, address-stable form"
    )]
    pub(super) spare_sends: Vec<Box<UdpSend>>,
    pub(super) received: Vec<InboundDatagram>,
    /// `close_datagrams` ran: nothing is re-armed.
    pub(super) closing: bool,
    pub(super) stats: DatagramStats,
}

/// What multishot receiving needs: the provided buffers and the `msghdr` that tells the
/// kernel how much of each to reserve for the sender's address and the control messages.
pub(super) struct MultiRecv {
    pub(super) ring: BufRing,
    pub(super) template: Box<libc::msghdr>,
}

/// Bytes of `struct io_uring_recvmsg_out` (four `u32`: name, control and payload lengths,
/// flags) at the start of every multishot receive's buffer.
const RECVMSG_OUT_HEADER: usize = 16;

/// The datagram buffer ring's group id (the connections' ring is group 0).
const DATAGRAM_GROUP: u16 = 1;

impl UringUdp {
    pub(super) fn new(
        config: &RuntimeConfig,
        sockets: Vec<UdpSocket>,
        ring: &IoUring,
    ) -> Result<Self, RuntimeError> {
        let multi = if config.datagram_recv_multishot && !sockets.is_empty() {
            Some(MultiRecv::register(config, ring)?)
        } else {
            None
        };
        Ok(Self {
            multishot: multi.is_some(),
            multi,
            sends_in_flight: vec![0; sockets.len()],
            gso_refused: vec![false; sockets.len()],
            sockets,
            recv_size: config.datagram_recv_size(),
            recv_depth: config.datagram_recv_depth,
            max_sends: config.datagram_sends_in_flight,
            spare_sends: Vec::new(),
            received: Vec::new(),
            closing: false,
            stats: DatagramStats::default(),
        })
    }

    pub(super) fn socket_count(&self) -> usize {
        self.sockets.len()
    }

    pub(super) fn is_multishot(&self) -> bool {
        self.multishot
    }

    /// The kernel refused multishot receives: single-shot ones from now on.
    pub(super) fn single_shot_from_now(&mut self) {
        self.multishot = false;
    }

    pub(super) fn push_received(&mut self, datagram: InboundDatagram) {
        self.received.push(datagram);
    }

    pub(super) fn fd(&self, endpoint: usize) -> Option<RawFd> {
        self.sockets.get(endpoint).map(AsRawFd::as_raw_fd)
    }

    pub(super) fn take(&mut self, into: &mut Vec<InboundDatagram>) {
        into.append(&mut self.received);
    }

    /// Adds the counts of completed sends and the buffer ring's to `stats`.
    pub(super) fn add_stats(&mut self, stats: &mut ShardStats) {
        let own = std::mem::take(&mut self.stats);
        stats.datagrams.sent += own.sent;
        stats.datagrams.send_failed += own.send_failed;
        if let Some(multi) = &mut self.multi {
            stats.recv_buffers_released += multi.ring.take_released();
        }
    }

    /// Whether the buffer ring's offer wants a check soon.
    pub(super) fn next_check_within(&self) -> Option<std::time::Duration> {
        self.multi.as_ref()?.ring.next_check_within()
    }

    /// For a shard gone quiet (see [`BufRing::release_every_buffer`]).
    pub(super) fn release_every_buffer(&mut self, settled: bool) {
        if let Some(multi) = &mut self.multi {
            multi.ring.release_every_buffer(settled);
        }
    }

    /// For a teardown that could not reap every operation: keeps the buffer ring's memory.
    pub(super) fn leak(&mut self) {
        if let Some(multi) = &mut self.multi {
            multi.ring.leak();
        }
    }

    pub(super) fn shrink(&mut self) {
        self.spare_sends = Vec::new();
        self.received.shrink_to_fit();
    }
}

impl MultiRecv {
    fn register(config: &RuntimeConfig, ring: &IoUring) -> Result<Self, RuntimeError> {
        use crate::sys::udp::{CONTROL_SPACE, NAME_SPACE};
        let buf_size =
            RECVMSG_OUT_HEADER + NAME_SPACE + CONTROL_SPACE + config.datagram_recv_size();
        let buf_size = u32::try_from(buf_size).expect("invariant: validated sizes");
        let trims = super::ring::defers_task_work(ring);
        let submitter = ring.submitter();
        let count = config.datagram_recv_buffers;
        let ring = BufRing::register(&submitter, count, buf_size, DATAGRAM_GROUP, trims)
            .map_err(|source| RuntimeError::syscall("IORING_REGISTER_PBUF_RING", source))?;
        // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no control data).
        let mut template: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        template.msg_namelen = NAME_SPACE as libc::socklen_t;
        template.msg_controllen = CONTROL_SPACE as _;
        Ok(Self { ring, template })
    }
}
