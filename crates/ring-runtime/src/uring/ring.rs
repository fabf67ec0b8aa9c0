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

fn probe_on_this_thread(buf_size: u32) -> Result<(), RuntimeError> {
    let mut ring = build_ring(8, 16)?;
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
        BufRing::register(&ring.submitter(), 2, buf_size, 0).map_err(|error| {
            match error.raw_os_error() {
                Some(libc::ENOMEM) => RuntimeError::MemlockTooLow {
                    limit_bytes: memlock_limit(),
                },
                _ => RuntimeError::KernelTooOld {
                    missing: "IORING_REGISTER_PBUF_RING",
                },
            }
        })?;
    let result = probe_multishot_recv(&mut ring, &buffers);
    // Dropping the ring first ends the registration before the buffers are unmapped.
    drop(ring);
    drop(buffers);
    result
}

fn missing_sq() -> RuntimeError {
    RuntimeError::syscall("io_uring push", io::Error::from(io::ErrorKind::WouldBlock))
}

/// One multishot receive on a socketpair: it must deliver the byte and stay armed.
fn probe_multishot_recv(ring: &mut IoUring, buffers: &BufRing) -> Result<(), RuntimeError> {
    let missing = RuntimeError::KernelTooOld {
        missing: "multishot recv with provided buffers",
    };
    let (mut writer, reader) =
        UnixStream::pair().map_err(|e| RuntimeError::syscall("socketpair", e))?;
    writer
        .write_all(b"x")
        .map_err(|e| RuntimeError::syscall("write", e))?;
    let recv = opcode::RecvMulti::new(types::Fd(reader.as_raw_fd()), buffers.group())
        .build()
        .user_data(1);
    // SAFETY: the receive uses only the registered buffer group and `reader`, both alive
    // until the ring is dropped (the caller drops the ring before them).
    unsafe { ring.submission().push(&recv) }.map_err(|_| missing_sq())?;
    let timeout = types::Timespec::from(Duration::from_secs(1));
    let args = types::SubmitArgs::new().timespec(&timeout);
    match ring.submitter().submit_with_args(1, &args) {
        Ok(_) => {}
        Err(error) if error.raw_os_error() == Some(libc::ETIME) => return Err(missing),
        Err(error) => return Err(RuntimeError::syscall("io_uring_enter", error)),
    }
    let cqe = ring.completion().next().ok_or(missing)?;
    let armed = cqe.result() == 1 && cqueue::more(cqe.flags());
    if !armed {
        return Err(RuntimeError::KernelTooOld {
            missing: "multishot recv with provided buffers",
        });
    }
    Ok(())
}
