//! `eventfd(2)`: the shards' wake-up primitive.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::cvt;

/// A nonblocking, close-on-exec eventfd.
#[derive(Debug)]
pub(crate) struct EventFd {
    file: File,
}

impl EventFd {
    /// Creates a new eventfd with counter 0.
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; the returned descriptor is checked by `cvt`.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self {
            file: File::from(owned),
        })
    }

    /// A second descriptor for the same eventfd.
    pub(crate) fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            file: self.file.try_clone()?,
        })
    }

    /// Adds 1 to the counter, waking whoever waits on the descriptor.
    pub(crate) fn notify(&self) -> io::Result<()> {
        match (&self.file).write(&1u64.to_ne_bytes()) {
            Ok(_) => Ok(()),
            // The counter is saturated: a wake-up is pending anyway.
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Resets the counter; returns whether it was non-zero.
    pub(crate) fn drain(&self) -> io::Result<bool> {
        let mut buf = [0u8; 8];
        match (&self.file).read(&mut buf) {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Blocks until the descriptor is readable or `timeout_ms` passes; `Ok(false)` on timeout.
    #[cfg(test)]
    pub(crate) fn wait_readable(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pollfd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1.
        let ready = cvt(unsafe { libc::poll(&mut pollfd, 1, timeout_ms) })?;
        Ok(ready > 0)
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}
