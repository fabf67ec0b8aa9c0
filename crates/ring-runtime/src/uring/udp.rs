//! The io_uring backend's datagram sockets. Receiving: one multishot `RECVMSG` per socket into
//! the datagram buffer ring (`udp_multi.rs`), or, without it (`RuntimeConfig::
//! datagram_recv_multishot` off, or a kernel before 6.0), `RuntimeConfig::datagram_recv_depth`
//! single-shot `RECVMSG`s per socket, each re-armed with its record when it completes. Sending:
//! one `SENDMSG` per datagram (or GSO train), at most `RuntimeConfig::datagram_sends_in_flight`
//! per socket, the rest waiting in the endpoint's queue. Every record is owned by its op table
//! entry until the completion; the sockets close with the backend, after the teardown reaped
//! every operation.

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};

use io_uring::{IoUring, opcode, types};

use super::UringBackend;
use super::buf_ring::BufRing;
use super::ops::Op;
use crate::backend::InboundDatagram;
use crate::config::RuntimeConfig;
use crate::ctx::ShardStats;
use crate::datagram::{DatagramStats, OutQueue, refuses_gso};
use crate::error::RuntimeError;
use crate::sys::udp::{RecvSlot, SendSlot};

/// A `RECVMSG` in flight and the record it receives into.
pub(crate) struct UdpRecv {
    endpoint: usize,
    slot: Box<RecvSlot>,
}

/// A `SENDMSG` in flight and the record (with the datagram) it sends from.
pub(crate) struct UdpSend {
    endpoint: usize,
    slot: Box<SendSlot>,
}

/// The shard's datagram sockets and what is in flight on them. Dropped after the ring (the
/// backend's last field), so the buffer ring's registration ends before its memory goes.
pub(super) struct UringUdp {
    sockets: Vec<UdpSocket>,
    /// Multishot receiving: the buffer ring and the header template the receives use (kept
    /// registered until the backend goes, also after a switch to single-shot).
    pub(super) multi: Option<MultiRecv>,
    /// Receives are multishot (else `recv_depth` single-shot ones per socket).
    multishot: bool,
    recv_size: usize,
    recv_depth: usize,
    max_sends: usize,
    sends_in_flight: Vec<usize>,
    /// Endpoints whose device refused a GSO train, to tell their queue at the next send.
    gso_refused: Vec<bool>,
    #[allow(
        clippy::vec_box,
        reason = "op table entries need the boxed, address-stable form"
    )]
    spare_sends: Vec<Box<UdpSend>>,
    received: Vec<InboundDatagram>,
    /// `close_datagrams` ran: nothing is re-armed.
    pub(super) closing: bool,
    stats: DatagramStats,
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

impl UringBackend {
    /// Arms every socket's receives.
    pub(super) fn arm_udp(&mut self) -> Result<(), RuntimeError> {
        for endpoint in 0..self.udp.sockets.len() {
            self.arm_udp_endpoint(endpoint)?;
        }
        Ok(())
    }

    /// Arms one socket's receives: its multishot receive, or its single-shot ones.
    pub(super) fn arm_udp_endpoint(&mut self, endpoint: usize) -> Result<(), RuntimeError> {
        if self.udp.multishot {
            return self.arm_udp_multi(endpoint);
        }
        for _ in 0..self.udp.recv_depth {
            let slot = RecvSlot::new(self.udp.recv_size);
            self.arm_udp_recv(Box::new(UdpRecv { endpoint, slot }))?;
        }
        Ok(())
    }

    fn arm_udp_recv(&mut self, mut recv: Box<UdpRecv>) -> Result<(), RuntimeError> {
        let Some(fd) = self.udp.fd(recv.endpoint) else {
            return Ok(());
        };
        let msg = recv.slot.prepare();
        let entry = opcode::RecvMsg::new(types::Fd(fd), msg).build();
        let user_data = self.ops.insert(Op::UdpRecv(recv));
        // SAFETY: the header and everything it points at are boxed in the op table entry until
        // the completion; the socket closes only with the backend, after the teardown.
        unsafe { self.push(entry.user_data(user_data)) }
    }

    /// A receive completed: report the datagram, arm the record again.
    pub(super) fn udp_received(&mut self, user_data: u64, result: i32) -> Result<(), RuntimeError> {
        let Some(Op::UdpRecv(recv)) = self.ops.remove(user_data) else {
            return Ok(());
        };
        if let Ok(len) = usize::try_from(result)
            && let Some(received) = recv.slot.take(len)
        {
            let endpoint = recv.endpoint;
            self.udp
                .received
                .push(InboundDatagram { endpoint, received });
        }
        let ended = result == -libc::ECANCELED || result == -libc::EBADF;
        if ended || self.quiescing || self.udp.closing {
            return Ok(());
        }
        // An error (an ICMP report on the socket) ends only that receive.
        self.arm_udp_recv(recv)
    }

    /// Starts sends from the front of `out` while the socket has room for more in flight.
    pub(super) fn send_udp(&mut self, endpoint: usize, out: &mut OutQueue) {
        let Some(fd) = self.udp.fd(endpoint) else {
            return;
        };
        if std::mem::take(&mut self.udp.gso_refused[endpoint]) {
            out.refuse_gso();
        }
        while self.udp.sends_in_flight[endpoint] < self.udp.max_sends {
            let Some(datagram) = out.pop() else {
                return;
            };
            let mut send = self.udp.spare_sends.pop().unwrap_or_else(|| {
                let slot = SendSlot::new();
                Box::new(UdpSend { endpoint, slot })
            });
            send.endpoint = endpoint;
            let msg = send.slot.prepare(datagram);
            let flags = libc::MSG_NOSIGNAL as u32;
            let entry = opcode::SendMsg::new(types::Fd(fd), msg)
                .flags(flags)
                .build();
            let user_data = self.ops.insert(Op::UdpSend(send));
            // SAFETY: the header, the peer address and the datagram are boxed in the op table
            // entry until the completion; the socket outlives every operation.
            if unsafe { self.push(entry.user_data(user_data)) }.is_err() {
                // Not submitted: the ring failed; the datagram is lost like on the network.
                self.ops.remove(user_data);
                self.udp.stats.send_failed += 1;
                return;
            }
            self.udp.sends_in_flight[endpoint] += 1;
        }
    }

    /// A send completed: count it, keep its record for the next one.
    pub(super) fn udp_sent(&mut self, user_data: u64, result: i32) {
        let Some(Op::UdpSend(mut send)) = self.ops.remove(user_data) else {
            return;
        };
        if let Some(in_flight) = self.udp.sends_in_flight.get_mut(send.endpoint) {
            *in_flight = in_flight.saturating_sub(1);
        }
        if result >= 0 {
            self.udp.stats.sent += 1;
        } else if result != -libc::ECANCELED {
            self.udp.stats.send_failed += 1;
            if let Some(datagram) = &send.slot.datagram
                && refuses_gso(-result, datagram)
                && let Some(refused) = self.udp.gso_refused.get_mut(send.endpoint)
            {
                *refused = true;
            }
        }
        send.slot.datagram = None;
        if self.udp.spare_sends.len() < self.udp.max_sends {
            self.udp.spare_sends.push(send);
        }
    }

    /// Cancels every armed receive; none is armed again.
    pub(super) fn close_udp(&mut self) {
        if self.udp.closing {
            return;
        }
        self.udp.closing = true;
        let receives: Vec<u64> = self
            .ops
            .keys()
            .into_iter()
            .filter(|&key| {
                matches!(
                    self.ops.get_mut(key),
                    Some(Op::UdpRecv(_) | Op::UdpRecvMulti { .. })
                )
            })
            .collect();
        for key in receives {
            self.cancel(key);
        }
    }
}
