//! Socket set-up: `SO_REUSEPORT` listeners (one per shard per address) and outbound sockets.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::error::RuntimeError;

/// One listening socket per shard for every configured address, all sharing one port per
/// address (port 0 resolves on the first shard's bind), or the sockets `inherited` holds for
/// it. Returns each shard's listeners and the resolved addresses.
pub(crate) fn bind_shard_listeners(
    addrs: &[SocketAddr],
    shards: usize,
    backlog: i32,
    inherited: &super::handover::InheritedListeners,
) -> Result<(Vec<Vec<TcpListener>>, Vec<SocketAddr>), RuntimeError> {
    let mut per_shard: Vec<Vec<TcpListener>> = (0..shards).map(|_| Vec::new()).collect();
    let mut resolved = Vec::with_capacity(addrs.len());
    for &addr in addrs {
        let mut bound = addr;
        let handed = inherited.take(addr);
        if !handed.is_empty() {
            // Handed over (an upgrade): the same sockets, accept queues included, one or more
            // per shard; shards beyond them join the port's SO_REUSEPORT group.
            let mut served = vec![false; shards];
            for (index, listener) in handed.into_iter().enumerate() {
                per_shard[index % shards].push(listener);
                served[index % shards] = true;
            }
            for (listeners, _) in per_shard.iter_mut().zip(served).filter(|(_, s)| !s) {
                let listener = bind_reuseport(addr, backlog)
                    .map_err(|source| RuntimeError::Bind { addr, source })?;
                listeners.push(listener);
            }
            resolved.push(addr);
            continue;
        }
        if addr.port() != 0 {
            ensure_unused(addr).map_err(|source| RuntimeError::Bind { addr, source })?;
        }
        for listeners in per_shard.iter_mut() {
            let listener = bind_reuseport(bound, backlog).map_err(|source| RuntimeError::Bind {
                addr: bound,
                source,
            })?;
            if bound.port() == 0 {
                bound = listener
                    .local_addr()
                    .map_err(|source| RuntimeError::Bind { addr, source })?;
            }
            listeners.push(listener);
        }
        resolved.push(bound);
    }
    Ok((per_shard, resolved))
}

/// How long binding waits for a port whose listeners are closing: a process killed a moment
/// ago (a supervisor restarting it at once) releases the sockets its io_uring rings held some
/// milliseconds after it is reaped; joining its `SO_REUSEPORT` group meanwhile would hand some
/// new connections to listeners about to close.
const CLOSING_LISTENERS_WAIT: Duration = Duration::from_secs(2);

/// Fails with `AddrInUse` when something listens on `addr` for longer than
/// [`CLOSING_LISTENERS_WAIT`]. `SO_REUSEPORT` lets any process of the same user join a port's
/// listeners, so a second broker started by mistake on the same port would silently take a
/// share of its connections, and a broker restarted at once would share it with the killed
/// one's closing listeners: a plain bind (no `SO_REUSEPORT`) first tells whether the port is
/// free.
fn ensure_unused(addr: SocketAddr) -> io::Result<()> {
    let deadline = Instant::now() + CLOSING_LISTENERS_WAIT;
    loop {
        match probe_bind(addr) {
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => return result,
        }
    }
}

/// A plain bind of `addr` (dropped at once): whether the port is free.
fn probe_bind(addr: SocketAddr) -> io::Result<()> {
    let probe = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Connections of an earlier run in TIME_WAIT do not make the port busy.
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&SockAddr::from(addr))
}

fn bind_reuseport(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&SockAddr::from(addr))?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

/// Where Linux publishes the largest `listen(2)` backlog it honours.
const SOMAXCONN_PATH: &str = "/proc/sys/net/core/somaxconn";
/// The backlog assumed when [`SOMAXCONN_PATH`] cannot be read.
const FALLBACK_BACKLOG: i32 = 4096;

/// The kernel's largest listen backlog (`net.core.somaxconn`; a larger `listen(2)` backlog is
/// lowered to it), or 4096 when it cannot be read.
pub fn kernel_max_listen_backlog() -> i32 {
    std::fs::read_to_string(SOMAXCONN_PATH)
        .ok()
        .and_then(|text| text.trim().parse::<i32>().ok())
        .filter(|&backlog| backlog > 0)
        .unwrap_or(FALLBACK_BACKLOG)
}

/// A nonblocking TCP socket with `TCP_NODELAY`, bound to `local` when given, not yet
/// connected.
pub(crate) fn outbound_socket(addr: SocketAddr, local: Option<SocketAddr>) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    socket.set_nodelay(true)?;
    if let Some(local) = local {
        socket.set_reuse_address(true)?;
        socket.bind(&SockAddr::from(local))?;
    }
    Ok(socket)
}

/// Starts a nonblocking connect; `Ok(())` also when it is still in progress.
pub(crate) fn start_connect(stream: &TcpStream, addr: SocketAddr) -> io::Result<()> {
    match socket2::SockRef::from(stream).connect(&SockAddr::from(addr)) {
        Ok(()) => Ok(()),
        Err(error) if error.raw_os_error() == Some(libc::EINPROGRESS) => Ok(()),
        Err(error) => Err(error),
    }
}

/// The pending error of a socket (`SO_ERROR`): how a nonblocking connect ended.
pub(crate) fn take_socket_error(stream: &TcpStream) -> io::Result<()> {
    match stream.take_error()? {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// Prepares an accepted socket: `TCP_NODELAY`, nonblocking.
pub(crate) fn prepare_accepted(stream: &TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)
}

/// Makes the next close send a RST instead of a FIN (`SO_LINGER` 0): used when a connection is
/// aborted with unsent data.
pub(crate) fn set_reset_on_close(stream: &TcpStream) -> io::Result<()> {
    socket2::SockRef::from(stream).set_linger(Some(std::time::Duration::ZERO))
}

/// One nonblocking `sendmsg(2)` of `iovecs` with `MSG_NOSIGNAL` (a closed peer gives `EPIPE`,
/// never `SIGPIPE`). Returns the bytes sent.
pub(crate) fn send_vectored(fd: RawFd, iovecs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: all-zero is a valid msghdr (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iovecs.as_ptr().cast_mut();
    msg.msg_iovlen = iovecs.len() as _;
    // SAFETY: `msg` points at `iovecs`, which the caller keeps alive (and whose buffers it
    // keeps alive) for the duration of this synchronous call.
    let sent = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}
