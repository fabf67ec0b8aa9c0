//! `epoll(7)` wrappers for the epoll backend.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::cvt;

/// Readiness flags the backend registers and reads back.
pub(crate) const READABLE: u32 = libc::EPOLLIN as u32;
pub(crate) const WRITABLE: u32 = libc::EPOLLOUT as u32;
pub(crate) const PEER_CLOSED: u32 = libc::EPOLLRDHUP as u32;
pub(crate) const HANG_UP: u32 = libc::EPOLLHUP as u32;
pub(crate) const ERROR: u32 = libc::EPOLLERR as u32;
pub(crate) const EDGE: u32 = libc::EPOLLET as u32;

/// An epoll instance.
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// One ready descriptor: its token and readiness flags.
#[derive(Clone, Copy)]
pub(crate) struct Ready {
    pub(crate) token: u64,
    pub(crate) flags: u32,
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the result is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Registers `fd` with `flags`, reporting `token`.
    pub(crate) fn add(&self, fd: RawFd, token: u64, flags: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, flags)
    }

    /// Removes `fd` from the interest list.
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, flags: u32) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: flags,
            u64: token,
        };
        // SAFETY: `event` is a valid epoll_event for the duration of the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) })?;
        Ok(())
    }

    /// Waits up to `timeout` (rounded up to whole milliseconds; `None` blocks) and appends the
    /// ready descriptors to `ready` (at most `capacity`).
    pub(crate) fn wait(
        &self,
        timeout: Option<Duration>,
        capacity: usize,
        raw: &mut Vec<libc::epoll_event>,
        ready: &mut Vec<Ready>,
    ) -> io::Result<()> {
        let timeout_ms = timeout.map_or(-1, |t| {
            let ms = t.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        });
        raw.clear();
        raw.reserve(capacity);
        let max = libc::c_int::try_from(capacity).unwrap_or(libc::c_int::MAX);
        // SAFETY: `raw` has room for `max` events; the kernel writes at most that many.
        let count =
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), raw.as_mut_ptr(), max, timeout_ms) };
        let count = match cvt(count) {
            Ok(count) => count as usize,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => 0,
            Err(error) => return Err(error),
        };
        // SAFETY: the kernel initialised the first `count` entries (count <= capacity).
        unsafe { raw.set_len(count) };
        ready.extend(raw.iter().map(|event| Ready {
            token: event.u64,
            flags: event.events,
        }));
        Ok(())
    }
}
