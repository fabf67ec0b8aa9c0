//! UDP sockets for datagram endpoints: one `SO_REUSEPORT` socket per shard per listen address,
//! one socket of its own per shard per client address, and
//! the message records both backends receive into and send from (the epoll backend with
//! `recvmsg`/`sendmsg`, io_uring with `RECVMSG`/`SENDMSG` on the same records). A record's
//! `msghdr` points into the record itself, so records are boxed and never move while the
//! kernel may use them.

use std::io;
use std::mem::{size_of, size_of_val};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use bytes::Bytes;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::datagram::OutDatagram;
use crate::error::RuntimeError;

/// Room for one `UDP_GRO` or `UDP_SEGMENT` control message, with the alignment cmsg needs.
type ControlSpace = [u64; 8];

/// Each shard's sockets for every address and the resolved listen addresses.
pub(crate) struct BoundUdp {
    /// `per_shard[shard][endpoint]`: the listen addresses' sockets, then the client ones.
    pub(crate) per_shard: Vec<Vec<UdpSocket>>,
    /// The listen addresses, port 0 resolved (a client address resolves per shard).
    pub(crate) addrs: Vec<SocketAddr>,
    /// Whether the kernel takes `UDP_SEGMENT` (GSO) on these sockets.
    pub(crate) gso: bool,
}

/// What every datagram socket is set up with.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdpOptions {
    /// Receive offload (`UDP_GRO`), asked for best effort.
    pub(crate) gro: bool,
    /// `SO_RCVBUF` and `SO_SNDBUF` (bytes; the kernel doubles it for its bookkeeping and caps it
    /// at `net.core.rmem_max` / `wmem_max`); 0 keeps the kernel's default.
    pub(crate) buffer: usize,
}

/// One socket per shard for every listen address, all sharing one port per address (port 0
/// resolves on the first shard's bind), then one socket per shard for every client address,
/// each bound on its own (port 0: a port of its own per shard), each set up with `options`.
pub(crate) fn bind_shard_udp(
    addrs: &[SocketAddr],
    clients: &[SocketAddr],
    shards: usize,
    options: UdpOptions,
) -> Result<BoundUdp, RuntimeError> {
    let mut per_shard: Vec<Vec<UdpSocket>> = (0..shards).map(|_| Vec::new()).collect();
    let mut resolved = Vec::with_capacity(addrs.len());
    let mut gso = true;
    for &addr in addrs {
        let mut bound = addr;
        if addr.port() != 0 {
            ensure_unused_udp(addr).map_err(|source| RuntimeError::Bind { addr, source })?;
        }
        for sockets in per_shard.iter_mut() {
            let bind_error = |source| RuntimeError::Bind {
                addr: bound,
                source,
            };
            let socket = bind_reuseport_udp(bound, options).map_err(bind_error)?;
            gso &= takes_gso(&socket);
            if bound.port() == 0 {
                bound = socket.local_addr().map_err(bind_error)?;
            }
            sockets.push(socket);
        }
        resolved.push(bound);
    }
    for &addr in clients {
        for sockets in per_shard.iter_mut() {
            let socket = bind_client_udp(addr, options)
                .map_err(|source| RuntimeError::Bind { addr, source })?;
            gso &= takes_gso(&socket);
            sockets.push(socket);
        }
    }
    Ok(BoundUdp {
        per_shard,
        addrs: resolved,
        gso,
    })
}

/// Fails with `AddrInUse` when a socket already holds `addr`: `SO_REUSEPORT` would let a
/// second broker of the same user silently share the port's datagrams (the TCP listeners
/// check the same, `socket.rs`).
fn ensure_unused_udp(addr: SocketAddr) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&SockAddr::from(addr))
}

fn bind_reuseport_udp(addr: SocketAddr, options: UdpOptions) -> io::Result<UdpSocket> {
    let socket = udp_socket(addr, options)?;
    socket.set_reuse_port(true)?;
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into())
}

/// A client endpoint's socket: this shard's alone (no `SO_REUSEPORT`), so every reply to its
/// connections arrives here.
fn bind_client_udp(addr: SocketAddr, options: UdpOptions) -> io::Result<UdpSocket> {
    let socket = udp_socket(addr, options)?;
    socket.bind(&SockAddr::from(addr))?;
    Ok(socket.into())
}

/// A non-blocking UDP socket for `addr`'s family, not bound yet, set up with `options`. A
/// burst of handshakes (thousands of clients connecting at once) overflows the kernel's
/// default receive buffer of about 200 KiB, and every datagram dropped there costs its
/// sender a retransmission timeout.
fn udp_socket(addr: SocketAddr, options: UdpOptions) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    if options.buffer > 0 {
        // Best effort: the kernel caps the size, and a smaller buffer still works.
        let _ = socket.set_recv_buffer_size(options.buffer);
        let _ = socket.set_send_buffer_size(options.buffer);
    }
    if options.gro {
        // Best effort: without it every datagram arrives alone.
        let _ = set_udp_option(&socket, libc::UDP_GRO, 1);
    }
    Ok(socket)
}

/// Whether the kernel knows `UDP_SEGMENT` (Linux 4.18+): its `getsockopt` succeeds.
fn takes_gso(socket: &UdpSocket) -> bool {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are valid for writes of the sizes given, for this call only.
    let ret = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    ret == 0
}

fn set_udp_option(
    socket: &impl AsRawFd,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a valid c_int for the duration of this call.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            option,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    super::cvt(ret).map(drop)
}

/// A receive record: a `msghdr` pointing at its own address, iovec, control space and buffer.
pub(crate) struct RecvSlot {
    msg: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
    control: ControlSpace,
    buf: Box<[u8]>,
}

/// What one receive got.
pub(crate) struct Received {
    pub(crate) peer: SocketAddr,
    pub(crate) data: Bytes,
    pub(crate) segment_size: Option<u16>,
}

impl RecvSlot {
    /// A record receiving up to `size` bytes (64 KiB with GRO: a train may be that long).
    pub(crate) fn new(size: usize) -> Box<Self> {
        Box::new(Self {
            // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no control data).
            msg: unsafe { std::mem::zeroed() },
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            // SAFETY: all-zero is a valid sockaddr_storage (family AF_UNSPEC).
            addr: unsafe { std::mem::zeroed() },
            control: [0; 8],
            buf: vec![0; size].into_boxed_slice(),
        })
    }

    /// Points the header at this record's parts (lengths reset) and returns it, for the next
    /// receive. The record must not move until that receive is over.
    pub(crate) fn prepare(&mut self) -> *mut libc::msghdr {
        self.iov.iov_base = self.buf.as_mut_ptr().cast();
        self.iov.iov_len = self.buf.len();
        self.msg.msg_name = (&raw mut self.addr).cast();
        self.msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        self.msg.msg_iov = &raw mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_control = self.control.as_mut_ptr().cast();
        self.msg.msg_controllen = size_of_val(&self.control) as _;
        self.msg.msg_flags = 0;
        &raw mut self.msg
    }

    /// The datagram a finished receive of `len` bytes left in the record (copied out, so the
    /// record can receive again at once); `None` for a truncated one or an unknown sender.
    pub(crate) fn take(&self, len: usize) -> Option<Received> {
        if self.msg.msg_flags & libc::MSG_TRUNC != 0 || len > self.buf.len() {
            return None;
        }
        // SAFETY: the kernel wrote a socket address of `msg_namelen` bytes into `addr`, a
        // sockaddr_storage (large enough for every family).
        let peer = unsafe { SockAddr::new(self.addr, self.msg.msg_namelen) }.as_socket()?;
        Some(Received {
            peer,
            data: Bytes::copy_from_slice(&self.buf[..len]),
            segment_size: self.gro_segment_size(),
        })
    }

    /// The `UDP_GRO` control message's segment size, if the kernel joined datagrams.
    fn gro_segment_size(&self) -> Option<u16> {
        // SAFETY: the header describes this record's control space, which the kernel filled
        // with `msg_controllen` bytes of well-formed control messages.
        unsafe { gro_in(&self.msg) }
    }
}

/// Bytes reserved for the sender's address in a receive (any family fits).
pub(crate) const NAME_SPACE: usize = size_of::<libc::sockaddr_storage>();

/// Bytes reserved for control messages in a receive.
pub(crate) const CONTROL_SPACE: usize = size_of::<ControlSpace>();

/// The `UDP_GRO` segment size among the control messages `msg` describes.
///
/// # Safety
/// `msg.msg_control` points at `msg.msg_controllen` readable, aligned bytes of well-formed
/// control messages (as the kernel writes them).
unsafe fn gro_in(msg: &libc::msghdr) -> Option<u16> {
    // SAFETY: forwarded to the caller's contract; the macros stay inside the described area.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            let header = &*cmsg;
            if header.cmsg_level == libc::SOL_UDP && header.cmsg_type == libc::UDP_GRO {
                let size = libc::CMSG_DATA(cmsg).cast::<libc::c_int>().read_unaligned();
                return u16::try_from(size).ok();
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// The `UDP_GRO` segment size among control messages the kernel copied into a provided
/// buffer (a multishot receive's): copied into aligned space first.
pub(crate) fn gro_segment_in(control: &[u8]) -> Option<u16> {
    let mut space: ControlSpace = [0; 8];
    let len = control.len().min(CONTROL_SPACE);
    for (word, bytes) in space.iter_mut().zip(control[..len].chunks(8)) {
        let mut padded = [0; 8];
        padded[..bytes.len()].copy_from_slice(bytes);
        *word = u64::from_ne_bytes(padded);
    }
    // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = len as _;
    // SAFETY: `msg` describes `len` aligned bytes of `space`, a copy of the control messages
    // the kernel wrote.
    unsafe { gro_in(&msg) }
}

/// The socket address in `name`, bytes the kernel wrote as a `sockaddr` (a multishot
/// receive's name field).
pub(crate) fn peer_from_name(name: &[u8]) -> Option<SocketAddr> {
    // SAFETY: all-zero is a valid sockaddr_storage (family AF_UNSPEC).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = name.len().min(NAME_SPACE);
    // SAFETY: `storage` has room for `len` bytes and is plain old data; the ranges are
    // distinct objects.
    unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), (&raw mut storage).cast(), len) };
    // SAFETY: `storage` holds the `len` bytes of a socket address the kernel wrote.
    unsafe { SockAddr::new(storage, len as libc::socklen_t) }.as_socket()
}

/// A send record: a `msghdr` naming the peer, one iovec over the datagram, and a
/// `UDP_SEGMENT` control message for a GSO train.
pub(crate) struct SendSlot {
    msg: libc::msghdr,
    iov: libc::iovec,
    addr: SockAddr,
    control: ControlSpace,
    /// The datagram, kept alive until the send is over.
    pub(crate) datagram: Option<OutDatagram>,
}

impl SendSlot {
    pub(crate) fn new() -> Box<Self> {
        let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
        Box::new(Self {
            // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no control data).
            msg: unsafe { std::mem::zeroed() },
            iov: libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            },
            addr: SockAddr::from(unspecified),
            control: [0; 8],
            datagram: None,
        })
    }

    /// Takes `datagram` and points the header at it; returns the header for the send. The
    /// record must not move, nor the datagram leave it, until that send is over.
    pub(crate) fn prepare(&mut self, datagram: OutDatagram) -> *const libc::msghdr {
        self.addr = SockAddr::from(datagram.peer);
        self.iov.iov_base = datagram.data.as_ptr().cast_mut().cast();
        self.iov.iov_len = datagram.data.len();
        self.msg.msg_name = self.addr.as_ptr().cast_mut().cast();
        self.msg.msg_namelen = self.addr.len();
        self.msg.msg_iov = &raw mut self.iov;
        self.msg.msg_iovlen = 1;
        self.msg.msg_control = std::ptr::null_mut();
        self.msg.msg_controllen = 0;
        if let Some(segment) = datagram.segment_size {
            self.set_segment_size(segment);
        }
        self.datagram = Some(datagram);
        &raw const self.msg
    }

    /// Adds the `UDP_SEGMENT` control message.
    fn set_segment_size(&mut self, segment: u16) {
        self.msg.msg_control = self.control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        let space = unsafe { libc::CMSG_SPACE(size_of::<u16>() as u32) };
        self.msg.msg_controllen = space as _;
        // SAFETY: the control space is 64 aligned bytes, more than CMSG_SPACE(2); the header
        // now describes it, so CMSG_FIRSTHDR is non-null and CMSG_DATA stays inside it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&raw const self.msg);
            (*cmsg).cmsg_level = libc::SOL_UDP;
            (*cmsg).cmsg_type = libc::UDP_SEGMENT;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            libc::CMSG_DATA(cmsg).cast::<u16>().write_unaligned(segment);
        }
    }
}

/// One nonblocking `recvmsg(2)` into `slot`; the bytes received.
pub(crate) fn recv_into(fd: RawFd, slot: &mut RecvSlot) -> io::Result<usize> {
    let msg = slot.prepare();
    // SAFETY: `msg` points into `slot`, borrowed mutably for this synchronous call.
    let received = unsafe { libc::recvmsg(fd, msg, libc::MSG_DONTWAIT) };
    usize::try_from(received).map_err(|_| io::Error::last_os_error())
}

/// One nonblocking `sendmsg(2)` of `datagram` through `slot`; the bytes sent. The datagram
/// stays in the slot (`slot.datagram`) for the caller to take back.
pub(crate) fn send_from(
    fd: RawFd,
    slot: &mut SendSlot,
    datagram: OutDatagram,
) -> io::Result<usize> {
    let msg = slot.prepare(datagram);
    // SAFETY: `msg` points into `slot` and at its datagram, both kept for this synchronous call.
    let sent = unsafe { libc::sendmsg(fd, msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    usize::try_from(sent).map_err(|_| io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_address_parses_from_its_kernel_bytes() {
        for addr in ["127.0.0.1:4433", "[::1]:4434"] {
            let addr: SocketAddr = addr.parse().unwrap();
            let raw = SockAddr::from(addr);
            // SAFETY: `raw` holds `len` initialised bytes of a socket address.
            let bytes = unsafe {
                std::slice::from_raw_parts(raw.as_ptr().cast::<u8>(), raw.len() as usize)
            };
            assert_eq!(peer_from_name(bytes), Some(addr));
        }
        assert_eq!(peer_from_name(&[0; 16]), None, "AF_UNSPEC is no sender");
    }

    #[test]
    fn a_gro_segment_size_is_found_among_control_messages_at_any_alignment() {
        let mut send = SendSlot::new();
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        let datagram = OutDatagram {
            peer,
            data: Bytes::from_static(b"x"),
            segment_size: Some(1200),
        };
        let msg = send.prepare(datagram);
        // SAFETY: `msg` points into `send`, alive here; its control area is CMSG_SPACE(2).
        let (control, len) = unsafe { ((*msg).msg_control.cast::<u8>(), (*msg).msg_controllen) };
        #[allow(clippy::unnecessary_cast, reason = "msg_controllen is a u32 on musl")]
        let len = len as usize;
        // SAFETY: the control area holds `len` initialised bytes (written by `prepare`).
        let mut bytes = unsafe { std::slice::from_raw_parts(control, len) }.to_vec();
        assert_eq!(gro_segment_in(&bytes), None, "UDP_SEGMENT is not UDP_GRO");
        // Turn it into the UDP_GRO message the kernel writes (an int), one byte off alignment.
        let type_at = std::mem::offset_of!(libc::cmsghdr, cmsg_type);
        bytes[type_at..type_at + 4].copy_from_slice(&libc::UDP_GRO.to_ne_bytes());
        // SAFETY: CMSG_LEN only computes a size.
        let int_len = unsafe { libc::CMSG_LEN(size_of::<libc::c_int>() as u32) } as usize;
        let len_at = std::mem::offset_of!(libc::cmsghdr, cmsg_len);
        bytes[len_at..len_at + size_of::<usize>()].copy_from_slice(&int_len.to_ne_bytes());
        let data_at = size_of::<libc::cmsghdr>();
        bytes.resize(data_at + 8, 0);
        bytes[data_at..data_at + 4].copy_from_slice(&1200i32.to_ne_bytes());
        let mut shifted = vec![0];
        shifted.extend_from_slice(&bytes);
        assert_eq!(gro_segment_in(&shifted[1..]), Some(1200));
    }
}
