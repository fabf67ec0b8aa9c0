//! The io_uring backend: multishot accept per listener, multishot receive per connection
//! into the shard's provided buffer ring, one `SENDMSG` (or `SENDMSG_ZC` above the configured
//! threshold) per connection per turn, connect, an eventfd read for wake-ups, and the ring's
//! wait timeout (`IORING_ENTER_EXT_ARG`) for the timer wheel.
//!
//! Lifecycle: every operation is an entry of the [`OpTable`] owning what it lends the kernel,
//! removed only at its last completion (also after `ASYNC_CANCEL`). A connection counts its
//! in-flight operations (`Conn::inflight`); the shard closes its descriptor only at zero.

mod buf_policy;
mod buf_ring;
mod complete;
mod fenced;
mod ops;
mod ring;
mod teardown;
mod udp;
mod udp_multi;
mod udp_state;

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use crate::backend::{
    Backend, Event, InboundDatagram, accept_refused, earliest, timeout_unless_pending,
};
use crate::config::RuntimeConfig;
use crate::conn::{Conn, ConnTable};
use crate::ctx::ShardStats;
use crate::datagram::{DatagramStats, OutQueue};
use crate::error::RuntimeError;
use crate::fence::FenceSide;
use crate::ids::ConnId;
use crate::sys::eventfd::EventFd;

use buf_ring::BufRing;
use ops::{Op, OpTable, UringConnect, UringWrite};

pub(crate) use ring::probe;

/// One reaped completion queue entry.
#[derive(Clone, Copy)]
pub(crate) struct Completion {
    user_data: u64,
    result: i32,
    flags: u32,
}

/// See the module documentation. `Drop` (`teardown.rs`) first cancels and reaps whatever is
/// still in flight; then field order matters: `ring` is dropped before `buf_ring` (ending the
/// buffer registration before the memory goes) and before `ops`.
pub(crate) struct UringBackend {
    ring: IoUring,
    buf_ring: BufRing,
    ops: OpTable,
    accept: Accepting,
    waker: Waker,
    quiescing: bool,
    writes: WriteSetup,
    /// Completions reaped but not yet handled.
    backlog: Vec<Completion>,
    recv: Starved,
    /// Bound on the teardown's wait for cancelled operations.
    cancel_timeout: Duration,
    stats: ShardStats,
    udp: udp_state::UringUdp,
}

/// The listening sockets and whether accepts are armed.
struct Accepting {
    listeners: Vec<Option<TcpListener>>,
    /// Listeners whose accept ended for want of descriptors; re-armed by `resume_accepting`.
    paused: Vec<usize>,
    accepting: bool,
}

/// The eventfd other threads wake the shard through, and its armed read.
struct Waker {
    wake: EventFd,
    wake_op: u64,
}

/// How writes are made: zero-copy above a size, at most so many iovecs, and spare write
/// records.
struct WriteSetup {
    zerocopy_threshold: Option<usize>,
    max_iovecs: usize,
    #[allow(
        clippy::vec_box,
        reason = "op table entries need the boxed, address-stable form"
    )]
    write_pool: Vec<Box<UringWrite>>,
}

/// Connections whose receive ended with `ENOBUFS`; re-armed at most `recv_buffers` per wait
/// (throttle: each can then get a buffer), not in a tight loop.
struct Starved {
    starved: std::collections::VecDeque<ConnId>,
    recv_buffers: usize,
}

impl Backend for UringBackend {
    fn new(
        config: &RuntimeConfig,
        listeners: Vec<TcpListener>,
        udp: Vec<UdpSocket>,
        wake: EventFd,
    ) -> Result<Self, RuntimeError> {
        let ring = ring::build_ring(config.ring_entries, config.completion_entries)?;
        let buf_ring = BufRing::register(
            &ring.submitter(),
            config.recv_buffers,
            config.recv_buffer_size,
            0,
            ring::defers_task_work(&ring),
        )
        .map_err(|source| RuntimeError::syscall("IORING_REGISTER_PBUF_RING", source))?;
        let udp = udp_state::UringUdp::new(config, udp, &ring)?;
        let mut backend = Self {
            ring,
            buf_ring,
            ops: OpTable::new(),
            accept: Accepting {
                listeners: listeners.into_iter().map(Some).collect(),
                paused: Vec::new(),
                accepting: true,
            },
            waker: Waker { wake, wake_op: 0 },
            quiescing: false,
            writes: WriteSetup {
                zerocopy_threshold: config.zerocopy_threshold,
                max_iovecs: config.max_iovecs,
                write_pool: Vec::new(),
            },
            backlog: Vec::new(),
            recv: Starved {
                starved: std::collections::VecDeque::new(),
                recv_buffers: usize::from(config.recv_buffers),
            },
            cancel_timeout: config.cancel_timeout,
            stats: ShardStats::default(),
            udp,
        };
        for index in 0..backend.accept.listeners.len() {
            backend.arm_accept(index)?;
        }
        backend.arm_wake()?;
        backend.arm_udp()?;
        Ok(backend)
    }

    fn wait(
        &mut self,
        conns: &mut ConnTable,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
        fence: Option<&FenceSide<'_>>,
    ) -> Result<Option<u64>, RuntimeError> {
        let timeout = self.wait_timeout(conns, timeout, events);
        let drain = self.look(timeout, fence)?;
        self.complete_backlog(conns, events)?;
        Ok(drain)
    }

    fn take_datagrams(&mut self, into: &mut Vec<InboundDatagram>) {
        self.udp.take(into);
    }

    fn send_datagrams(&mut self, endpoint: usize, out: &mut OutQueue, _: &mut DatagramStats) {
        // Counted at completion (`add_stats`).
        self.send_udp(endpoint, out);
    }

    fn close_datagrams(&mut self) {
        self.close_udp();
    }

    fn start_read(&mut self, id: ConnId, conn: &mut Conn) -> io::Result<()> {
        let fd = types::Fd(conn.fd());
        let entry = opcode::RecvMulti::new(fd, self.buf_ring.group()).build();
        let user_data = self.ops.insert(Op::Recv { conn: id });
        // SAFETY: the receive lends only the registered buffer group and the connection's
        // descriptor, which stays open while `conn.ops.inflight` > 0.
        unsafe { self.push(entry.user_data(user_data)) }.map_err(io::Error::other)?;
        conn.io.reading = true;
        conn.ops.read_op = user_data;
        conn.ops.inflight += 1;
        Ok(())
    }

    fn stop_read(&mut self, _id: ConnId, conn: &mut Conn) {
        if conn.ops.read_op != 0 {
            self.cancel(conn.ops.read_op);
            conn.ops.read_op = 0;
        }
    }

    fn pause_read(&mut self, _id: ConnId, conn: &mut Conn) {
        // `read_op` stays set: what the receive still produces before the cancel lands is
        // reported (the shard holds it), and its end re-arms it only if no longer paused.
        if conn.ops.read_op != 0 {
            self.cancel(conn.ops.read_op);
        }
    }

    fn start_write(&mut self, id: ConnId, conn: &mut Conn) -> io::Result<()> {
        let mut write = self.writes.write_pool.pop().unwrap_or_default();
        conn.send
            .take_batch(self.writes.max_iovecs, &mut write.batch);
        write.prepare();
        let zerocopy = self
            .writes
            .zerocopy_threshold
            .is_some_and(|threshold| write.batch.len() >= threshold);
        let fd = types::Fd(conn.fd());
        let flags = libc::MSG_NOSIGNAL as u32;
        let entry = match (zerocopy, write.batch.iovecs.as_slice()) {
            (true, _) => opcode::SendMsgZc::new(fd, &write.msg).flags(flags).build(),
            // One frame: plain SEND, cheaper for the kernel than importing a msghdr.
            (false, [single]) => {
                opcode::Send::new(fd, single.iov_base.cast(), single.iov_len as u32)
                    .flags(libc::MSG_NOSIGNAL)
                    .build()
            }
            (false, _) => opcode::SendMsg::new(fd, &write.msg).flags(flags).build(),
        };
        write.conn = id;
        write.zerocopy = zerocopy;
        let user_data = self.ops.insert(Op::Write(write));
        // SAFETY: the msghdr, iovecs and frames live in the boxed `UringWrite` owned by the op
        // table entry until the last completion; the descriptor stays open while inflight > 0.
        unsafe { self.push(entry.user_data(user_data)) }.map_err(io::Error::other)?;
        self.stats.zerocopy_writes += u64::from(zerocopy);
        conn.io.writing = true;
        conn.ops.out_op = user_data;
        conn.ops.inflight += 1;
        Ok(())
    }

    fn cancel_output(&mut self, _id: ConnId, conn: &mut Conn) {
        if conn.ops.out_op != 0 {
            self.cancel(conn.ops.out_op);
        }
    }

    fn start_connect(&mut self, id: ConnId, conn: &mut Conn, addr: SocketAddr) -> io::Result<()> {
        let connect = Box::new(UringConnect {
            conn: id,
            addr: socket2::SockAddr::from(addr),
        });
        let fd = types::Fd(conn.fd());
        let addr = &connect.addr;
        let entry = opcode::Connect::new(fd, addr.as_ptr().cast(), addr.len()).build();
        let user_data = self.ops.insert(Op::Connect(connect));
        // SAFETY: the address is boxed in the op table entry until the completion; the
        // descriptor stays open while inflight > 0.
        unsafe { self.push(entry.user_data(user_data)) }.map_err(io::Error::other)?;
        conn.ops.out_op = user_data;
        conn.ops.inflight += 1;
        Ok(())
    }

    fn release(&mut self, _id: ConnId, _conn: &mut Conn) {}

    fn stop_accepting(&mut self) {
        self.accept.accepting = false;
        let accepts: Vec<u64> = self
            .ops
            .keys()
            .into_iter()
            .filter(|&key| matches!(self.ops.get_mut(key), Some(Op::Accept { .. })))
            .collect();
        for key in accepts {
            self.cancel(key);
        }
        for listener in std::mem::take(&mut self.accept.paused) {
            if let Some(slot) = self.accept.listeners.get_mut(listener) {
                *slot = None;
            }
        }
    }

    fn resume_accepting(&mut self) -> Result<(), RuntimeError> {
        if !self.accept.accepting {
            return Ok(());
        }
        for listener in std::mem::take(&mut self.accept.paused) {
            self.arm_accept(listener)?;
        }
        Ok(())
    }

    fn is_idle(&self) -> bool {
        self.ops.len() == usize::from(self.waker.wake_op != 0)
    }

    fn add_stats(&mut self, stats: &mut ShardStats) {
        let own = std::mem::take(&mut self.stats);
        stats.zerocopy_writes += own.zerocopy_writes;
        stats.recv_rearms_enobufs += own.recv_rearms_enobufs;
        stats.recv_buffers_released += own.recv_buffers_released + self.buf_ring.take_released();
        stats.recv_buffers_warm = u64::from(self.buf_ring.warm_count());
        self.udp.add_stats(stats);
    }

    fn shrink_spare(&mut self) {
        self.writes.write_pool.clear();
        self.writes.write_pool.shrink_to_fit();
        self.backlog.shrink_to_fit();
        self.recv.starved.shrink_to_fit();
        self.udp.shrink();
        let settled = self.buffers_settled();
        self.buf_ring.release_every_buffer(settled);
        self.udp.release_every_buffer(settled);
    }

    fn quiesce(&mut self, conns: &mut ConnTable) -> Result<(), RuntimeError> {
        self.quiescing = true;
        self.cancel_everything();
        let mut events = Vec::new();
        while self.ops.len() > 0 {
            self.wait(conns, Some(Duration::from_millis(100)), &mut events, None)?;
            events.clear();
        }
        Ok(())
    }
}

impl UringBackend {
    /// Re-arms what starved, and bounds the wait: not at all when work is already pending,
    /// else by the buffer rings' next adjustment.
    fn wait_timeout(
        &mut self,
        conns: &mut ConnTable,
        timeout: Option<Duration>,
        events: &mut Vec<Event>,
    ) -> Option<Duration> {
        self.rearm_starved(conns, events);
        let pending = !self.backlog.is_empty() || !self.recv.starved.is_empty();
        let timeout = timeout_unless_pending(timeout, pending);
        let timeout = earliest(timeout, self.buf_ring.next_check_within());
        earliest(timeout, self.udp.next_check_within())
    }

    /// Handles the reaped completions, then lets the buffer rings adjust.
    fn complete_backlog(
        &mut self,
        conns: &mut ConnTable,
        events: &mut Vec<Event>,
    ) -> Result<(), RuntimeError> {
        for completion in std::mem::take(&mut self.backlog) {
            self.complete(conns, completion, events)?;
        }
        // After the completions (each buffer they carried is back), so that a trim is seen
        // by this turn's statistics and a dry ring's re-arms find the grown offer.
        let now = std::time::Instant::now();
        if self.buf_ring.adjust(now) && self.buffers_settled() {
            self.buf_ring.trim();
        }
        self.adjust_udp_ring(now);
        Ok(())
    }

    /// Re-arms receives that ran out of buffers (the previous wait's end let the ring adjust
    /// its offer), as many as the ring has buffers.
    fn rearm_starved(&mut self, conns: &mut ConnTable, events: &mut Vec<Event>) {
        let count = self.recv.starved.len().min(self.recv.recv_buffers);
        for conn in self.recv.starved.drain(..count).collect::<Vec<_>>() {
            let Some(record) = conns.get_mut(conn) else {
                continue;
            };
            if record.io.reading
                || record.io.read_paused
                || record.close.is_some()
                || self.quiescing
            {
                // A paused connection is armed again by its resume.
                continue;
            }
            self.stats.recv_rearms_enobufs += 1;
            if let Err(error) = self.start_read(conn, record) {
                events.push(Event::Failed { conn, error });
            }
        }
    }

    /// Whether every provided buffer the kernel picked has been seen by `take` (the rule of
    /// [`BufRing::trim`], which also needs task work that runs only inside
    /// `io_uring_enter`): nothing reaped and unhandled, nothing waiting in the completion queue
    /// or overflowed.
    fn buffers_settled(&mut self) -> bool {
        self.backlog.is_empty()
            && !self.ring.submission().cq_overflow()
            && self.ring.completion().is_empty()
    }

    fn arm_accept(&mut self, listener: usize) -> Result<(), RuntimeError> {
        let Some(socket) = self.accept.listeners.get(listener).and_then(Option::as_ref) else {
            return Ok(());
        };
        let fd = types::Fd(socket.as_raw_fd());
        let entry = opcode::AcceptMulti::new(fd)
            .flags(libc::SOCK_CLOEXEC)
            .build();
        let user_data = self.ops.insert(Op::Accept { listener });
        // SAFETY: the listener is dropped only after this operation's last completion.
        unsafe { self.push(entry.user_data(user_data)) }
    }

    fn arm_wake(&mut self) -> Result<(), RuntimeError> {
        let mut buf = Box::new([0u8; 8]);
        let fd = types::Fd(self.waker.wake.as_raw_fd());
        let entry = opcode::Read::new(fd, buf.as_mut_ptr(), 8).build();
        let user_data = self.ops.insert(Op::WakeRead { _buf: buf });
        // SAFETY: the 8-byte buffer is boxed in the op table entry; the eventfd is owned by
        // the backend and outlives every operation (quiesce or `Drop` reaps them first).
        unsafe { self.push(entry.user_data(user_data))? };
        self.waker.wake_op = user_data;
        Ok(())
    }

    /// Asks the kernel to cancel `target`; the target's own completion does the cleanup.
    fn cancel(&mut self, target: u64) {
        let user_data = self.ops.insert(Op::Cancel);
        let entry = opcode::AsyncCancel::new(target)
            .build()
            .user_data(user_data);
        // SAFETY: a cancel request lends nothing.
        if unsafe { self.push(entry) }.is_err() {
            self.ops.remove(user_data);
        }
    }

    /// Pushes an SQE; when the submission queue is full it submits and retries, reaping
    /// completions into the backlog if the completion queue is full too. Never drops.
    ///
    /// # Safety
    /// Everything the entry points at must stay valid until its last completion is reaped.
    unsafe fn push(&mut self, entry: squeue::Entry) -> Result<(), RuntimeError> {
        loop {
            // SAFETY: forwarded to the caller's contract.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            match self.ring.submit() {
                Ok(_) => {}
                Err(error) if error.raw_os_error() == Some(libc::EBUSY) => self.reap(),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(RuntimeError::syscall("io_uring_enter", error)),
            }
        }
    }

    fn submit_and_wait(&mut self, timeout: Option<Duration>) -> Result<(), RuntimeError> {
        let submitter = self.ring.submitter();
        let result = match timeout {
            None => submitter.submit_and_wait(1),
            Some(timeout) => {
                let timespec = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&timespec);
                submitter.submit_with_args(1, &args)
            }
        };
        match result {
            Ok(_) => Ok(()),
            Err(error) => match error.raw_os_error() {
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => Ok(()),
                _ => Err(RuntimeError::syscall("io_uring_enter", error)),
            },
        }
    }

    /// Moves every available completion into the backlog.
    fn reap(&mut self) {
        let mut completion = self.ring.completion();
        completion.sync();
        self.backlog
            .extend(completion.map(|cqe: cqueue::Entry| Completion {
                user_data: cqe.user_data(),
                result: cqe.result(),
                flags: cqe.flags(),
            }));
    }
}
