//! Listening sockets handed from one process to the next (a zero-downtime upgrade): sent over
//! a Unix stream socket as `SCM_RIGHTS` ancillary data, with a payload naming them. The
//! receiving process gets duplicates of the same sockets, so their accept queues (connections
//! the kernel completed while no process accepted) carry over and no connection attempt is
//! refused.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD` is 253).
pub const MAX_FDS: usize = 250;
/// The largest payload one message carries.
const MAX_PAYLOAD: usize = 64 * 1024;

/// Listening sockets handed over by the process before , taken by address
/// when the runtime binds.
#[derive(Debug, Clone, Default)]
pub struct InheritedListeners(std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpListener>>>);

impl InheritedListeners {
    pub fn new(listeners: Vec<std::net::TcpListener>) -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(listeners)))
    }

    /// Takes the listeners bound to `addr`.
    pub fn take(&self, addr: SocketAddr) -> Vec<std::net::TcpListener> {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (taken, kept) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|l| l.local_addr().is_ok_and(|local| local == addr));
        *all = kept;
        taken
    }

    /// Whether any is left.
    pub fn is_empty(&self) -> bool {
        self.0.lock().map_or(true, |all| all.is_empty())
    }
}

/// Sends `listeners` (each a duplicate stays with the caller) and `payload` in one message.
pub fn send_listeners(
    stream: &UnixStream,
    listeners: &[&TcpListener],
    payload: &[u8],
) -> io::Result<()> {
    if listeners.is_empty()
        || listeners.len() > MAX_FDS
        || payload.is_empty()
        || payload.len() > MAX_PAYLOAD
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "1 to 250 listeners and a payload of 1 byte to 64 KiB",
        ));
    }
    let fds: Vec<RawFd> = listeners.iter().map(|l| l.as_raw_fd()).collect();
    let fd_bytes = std::mem::size_of_val(fds.as_slice());
    // SAFETY: CMSG_SPACE only computes a size from its argument.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr() as *mut libc::c_void,
        iov_len: payload.len(),
    };
    let header = message_header(&mut iov, &mut control);
    // SAFETY: `header` has a control buffer of CMSG_SPACE(fd_bytes) bytes, so CMSG_FIRSTHDR is
    // non-null and its CMSG_DATA has room for `fd_bytes`; the copy writes exactly that many.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&header);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
    }
    // SAFETY: `header` is fully initialised above and its buffers are alive.
    let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &header, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    if sent as usize != payload.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "the payload was cut short",
        ));
    }
    Ok(())
}

/// Receives one message of [`send_listeners`]: the listeners (nonblocking, close-on-exec)
/// and the payload.
pub fn receive_listeners(stream: &UnixStream) -> io::Result<(Vec<TcpListener>, Vec<u8>)> {
    let mut payload = vec![0u8; MAX_PAYLOAD];
    // SAFETY: CMSG_SPACE only computes a size from its argument.
    let space =
        unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    let mut header = message_header(&mut iov, &mut control);
    // SAFETY: `header` describes buffers owned here that outlive the call.
    let received =
        unsafe { libc::recvmsg(stream.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    if received == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the other process closed the socket",
        ));
    }
    let fds = take_fds(&header);
    if header.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "too many descriptors: some were cut",
        ));
    }
    payload.truncate(received as usize);
    let listeners = fds
        .into_iter()
        .map(|fd| {
            let listener = TcpListener::from(fd);
            listener.set_nonblocking(true)?;
            Ok(listener)
        })
        .collect::<io::Result<Vec<_>>>()?;
    Ok((listeners, payload))
}

/// A message header over one buffer (`iov`) and a control buffer; both must outlive its use.
fn message_header(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: an all-zero msghdr is a valid empty header; the fields set point at the caller's
    // buffers, which outlive the sendmsg / recvmsg call the header is passed to.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = control.len() as _;
    header
}

/// The descriptors of every `SCM_RIGHTS` header `header` received, owned from now on.
fn take_fds(header: &libc::msghdr) -> Vec<OwnedFd> {
    let mut fds = Vec::new();
    // SAFETY: `header` was filled by recvmsg; CMSG_FIRSTHDR / CMSG_NXTHDR walk the control
    // buffer it describes, and each SCM_RIGHTS header holds `(cmsg_len - CMSG_LEN(0)) /
    // size_of::<RawFd>()` descriptors the kernel installed for this process, owned by no one
    // else: each is wrapped once in an OwnedFd.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let count = bytes / std::mem::size_of::<RawFd>();
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for index in 0..count {
                    let fd = std::ptr::read_unaligned(data.add(index));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    fds
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn listeners_cross_to_the_other_end_with_their_accept_queue() {
        let (one, two) = UnixStream::pair().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A connection the kernel completed before the hand-over, accepted after it.
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        send_listeners(&one, &[&listener], b"tcp 127.0.0.1\n").unwrap();
        drop(listener);
        let (mut received, payload) = receive_listeners(&two).unwrap();
        assert_eq!(payload, b"tcp 127.0.0.1\n");
        assert_eq!(received.len(), 1);
        let listener = received.remove(0);
        assert_eq!(listener.local_addr().unwrap(), addr);
        listener.set_nonblocking(false).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        server.read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
    }

    #[test]
    fn bad_requests_and_a_closed_peer_are_errors() {
        let (one, two) = UnixStream::pair().unwrap();
        assert!(send_listeners(&one, &[], b"x").is_err());
        drop(one);
        assert_eq!(
            receive_listeners(&two).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
