//! Ring set-up and kernel probing.
//!
//! Set-up tries `SINGLE_ISSUER | DEFER_TASKRUN` (6.1), then `COOP_TASKRUN | TASKRUN_FLAG`
//! (5.19), then no flags; SQPOLL is never used. The probe checks every opcode the backend
//! submits, registers a buffer ring, and runs one real multishot receive on a socketpair, so
//! `Auto` falls back to epoll on anything that would fail later.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use io_uring::{IoUring, Probe, cqueue, opcode, types};

use crate::config::RuntimeConfig;
use crate::error::RuntimeError;
use crate::sys::thread::memlock_limit;

use super::buf_ring::BufRing;

/// Opcodes the backend submits, with the names reported when one is missing.
const REQUIRED: [(u8, &str); 6] = [
    (opcode::AcceptMulti::CODE, "IORING_OP_ACCEPT"),
    (opcode::RecvMulti::CODE, "IORING_OP_RECV"),
    (opcode::SendMsg::CODE, "IORING_OP_SENDMSG"),
    (opcode::Connect::CODE, "IORING_OP_CONNECT"),
    (opcode::Read::CODE, "IORING_OP_READ"),
    (opcode::AsyncCancel::CODE, "IORING_OP_ASYNC_CANCEL"),
];

/// Creates a ring with the best task-run mode the kernel accepts.
pub(crate) fn build_ring(entries: u32, cq_entries: u32) -> Result<IoUring, RuntimeError> {
    let attempts: [fn(&mut io_uring::Builder) -> &mut io_uring::Builder; 3] = [
        |b| b.setup_single_issuer().setup_defer_taskrun(),
        |b| b.setup_coop_taskrun().setup_taskrun_flag(),
        |b| b,
    ];
    let mut last = None;
    for flags in attempts {
        let mut builder = IoUring::builder();
        builder.setup_cqsize(cq_entries).setup_clamp();
        match flags(&mut builder).build(entries) {
            Ok(ring) => return Ok(ring),
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => last = Some(error),
            Err(error) => return Err(setup_error(error)),
        }
    }
    Err(setup_error(last.unwrap_or_else(|| {
        io::Error::from_raw_os_error(libc::EINVAL)
    })))
}

/// Whether `ring` runs its completions' task work only inside this thread's
/// `io_uring_enter` (`DEFER_TASKRUN`): then the kernel picks no provided buffer between two
/// enters. [`build_ring`] asks for `SINGLE_ISSUER` only together with `DEFER_TASKRUN`, and the
/// crate reports only the former.
pub(crate) fn defers_task_work(ring: &IoUring) -> bool {
    ring.params().is_setup_single_issuer()
}

fn setup_error(error: io::Error) -> RuntimeError {
    match error.raw_os_error() {
        Some(libc::ENOMEM) => RuntimeError::MemlockTooLow {
            limit_bytes: memlock_limit(),
        },
        _ => RuntimeError::UringUnavailable { source: error },
    }
}

/// Checks that this kernel can run the io_uring backend with `config`.
///
/// Runs on a short-lived thread of its own: tearing a ring down queues task work on the
/// thread that submitted to it, which would interrupt the caller's blocking socket calls
/// (`EINTR` with `SO_RCVTIMEO`).
pub(crate) fn probe(config: &RuntimeConfig) -> Result<(), RuntimeError> {
    let buf_size = config.recv_buffer_size.min(4096);
    std::thread::Builder::new()
        .name("ringmq-probe".into())
        .spawn(move || probe_on_this_thread(buf_size))
        .map_err(|source| RuntimeError::syscall("spawn", source))?
        .join()
        .unwrap_or(Err(RuntimeError::KernelTooOld {
            missing: "io_uring probe (panicked)",
        }))
}

/// user_data of the probe's receive and of its cancel request.
const PROBE_RECV: u64 = 1;
const PROBE_CANCEL: u64 = 2;

/// The probe's ring and the buffer ring registered with it. Fields drop in declaration order,
/// on every path (unwinding included): `Drop` cancels the receive and reaps its last
/// completion, then the ring is torn down (ending the registration) before the buffer ring's
/// memory is unmapped.
struct ProbeRing {
    ring: IoUring,
    buffers: BufRing,
    recv_armed: bool,
}

impl Drop for ProbeRing {
    fn drop(&mut self) {
        if !self.recv_armed {
            return;
        }
        let cancel = opcode::AsyncCancel::new(PROBE_RECV)
            .build()
            .user_data(PROBE_CANCEL);
        // SAFETY: a cancel request lends nothing.
        if unsafe { self.ring.submission().push(&cancel) }.is_err() {
            return;
        }
        let timeout = types::Timespec::from(Duration::from_secs(1));
        // Bounded: the cancel's and the receive's completions, a few waits at most.
        for _ in 0..4 {
            let args = types::SubmitArgs::new().timespec(&timeout);
            if self.ring.submitter().submit_with_args(1, &args).is_err() {
                return;
            }
            let ended = self
                .ring
                .completion()
                .any(|cqe| cqe.user_data() == PROBE_RECV && !cqueue::more(cqe.flags()));
            if ended {
                return;
            }
        }
    }
}

fn probe_on_this_thread(buf_size: u32) -> Result<(), RuntimeError> {
    // Declared before the ring, so dropped after it: the receive never outlives its socket.
    let (mut writer, reader) =
        UnixStream::pair().map_err(|e| RuntimeError::syscall("socketpair", e))?;
    let ring = build_ring(8, 16)?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|_| RuntimeError::KernelTooOld {
            missing: "IORING_REGISTER_PROBE",
        })?;
    if let Some((_, name)) = REQUIRED.iter().find(|(code, _)| !probe.is_supported(*code)) {
        return Err(RuntimeError::KernelTooOld { missing: name });
    }
    let buffers =
        BufRing::register(&ring.submitter(), 2, buf_size, 0, false).map_err(|error| match error
            .raw_os_error()
        {
            Some(libc::ENOMEM) => RuntimeError::MemlockTooLow {
                limit_bytes: memlock_limit(),
            },
            _ => RuntimeError::KernelTooOld {
                missing: "IORING_REGISTER_PBUF_RING",
            },
        })?;
    let mut probe = ProbeRing {
        ring,
        buffers,
        recv_armed: false,
    };
    writer
        .write_all(b"x")
        .map_err(|e| RuntimeError::syscall("write", e))?;
    probe_multishot_recv(&mut probe, &reader)
}

fn missing_sq() -> RuntimeError {
    RuntimeError::syscall("io_uring push", io::Error::from(io::ErrorKind::WouldBlock))
}

/// One multishot receive on a socketpair: it must deliver the byte and stay armed.
fn probe_multishot_recv(probe: &mut ProbeRing, reader: &UnixStream) -> Result<(), RuntimeError> {
    let missing = RuntimeError::KernelTooOld {
        missing: "multishot recv with provided buffers",
    };
    let recv = opcode::RecvMulti::new(types::Fd(reader.as_raw_fd()), probe.buffers.group())
        .build()
        .user_data(PROBE_RECV);
    // SAFETY: the receive uses only the buffer group registered in `probe` and `reader`. The
    // caller declared `reader` before `probe`, so it is still open when `ProbeRing`'s drop
    // cancels the receive and reaps its last completion; then the ring is torn down before
    // the buffer memory is unmapped (field order).
    unsafe { probe.ring.submission().push(&recv) }.map_err(|_| missing_sq())?;
    probe.recv_armed = true;
    let timeout = types::Timespec::from(Duration::from_secs(1));
    let args = types::SubmitArgs::new().timespec(&timeout);
    match probe.ring.submitter().submit_with_args(1, &args) {
        Ok(_) => {}
        Err(error) if error.raw_os_error() == Some(libc::ETIME) => return Err(missing),
        Err(error) => return Err(RuntimeError::syscall("io_uring_enter", error)),
    }
    let cqe = probe.ring.completion().next().ok_or(missing)?;
    let armed = cqe.result() == 1 && cqueue::more(cqe.flags());
    probe.recv_armed = cqueue::more(cqe.flags());
    if !armed {
        return Err(RuntimeError::KernelTooOld {
            missing: "multishot recv with provided buffers",
        });
    }
    Ok(())
}
