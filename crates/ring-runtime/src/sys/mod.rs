//! Thin, audited wrappers over the system calls that std does not offer. Every `unsafe` block
//! of the runtime outside the io_uring and epoll modules lives here.

pub(crate) mod alloc;
pub(crate) mod cpu_time;
pub(crate) mod epoll;
pub(crate) mod eventfd;
pub(crate) mod handover;
pub(crate) mod rss;
pub(crate) mod sched;
pub(crate) mod socket;
pub(crate) mod thread;
pub(crate) mod udp;

use std::io;

/// Turns a `-1`-on-error libc return value into an `io::Result`.
pub(crate) fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}
