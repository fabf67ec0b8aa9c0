//! A blocking byte stream to a broker, plain TCP or TLS (rustls), split into a reading half
//! (the bridge's reader thread) and a writing half (the bridge thread).
//!
//! TLS over one socket read and written by two threads: the `ClientConnection` sits behind a
//! mutex taken only to feed it received bytes or take plaintext to send, never while blocked
//! in a socket read.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use broker_api::{OwnLink, OwnLinks};
use bytes::BytesMut;
use rustls::ClientConnection;

use super::error::BridgeError;
use super::tls::TlsClient;

/// Size of one socket read.
const READ_CHUNK: usize = 16 * 1024;

/// The reading half.
pub(crate) enum LinkReader {
    Plain(TcpStream),
    Tls {
        tcp: TcpStream,
        conn: Arc<Mutex<ClientConnection>>,
    },
}

/// The writing half.
pub(crate) enum LinkWriter {
    Plain(TcpStream),
    Tls {
        tcp: TcpStream,
        conn: Arc<Mutex<ClientConnection>>,
    },
}

/// Both halves, and a handle that closes the socket (ending a blocked read).
pub(crate) struct Link {
    pub(crate) reader: LinkReader,
    pub(crate) writer: LinkWriter,
    pub(crate) closer: Closer,
}

/// Shuts the socket down when asked or dropped: the reader thread's blocked read returns.
pub(crate) struct Closer {
    tcp: TcpStream,
    /// The broker's own link: its source address stays registered until this is dropped.
    _own: Option<OwnLink>,
}

impl Closer {
    /// Limits how long reads block (`None`: forever).
    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(timeout)
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }
}

/// Opens a connection to `address` (`HOST:PORT`, resolved now), with TLS when `tls` is given.
/// Reads and the TLS handshake give up after `timeout`; writes after `write_timeout`.
pub(crate) fn open(
    address: &str,
    tls: Option<&TlsClient>,
    timeout: Duration,
    write_timeout: Duration,
) -> Result<Link, BridgeError> {
    let tcp = connect_tcp(address, timeout)?;
    with_stream(tcp, address, tls, timeout, write_timeout, None)
}

/// Opens a plain connection to this broker at `local`, its source address registered in
/// `own` (so the `[ip]` guard neither limits nor bans it) from before it connects until the
/// link's closer is dropped.
pub(crate) fn open_own(
    local: SocketAddr,
    own: &Arc<OwnLinks>,
    timeout: Duration,
    write_timeout: Duration,
) -> Result<Link, BridgeError> {
    let error = |source| BridgeError::Connect {
        address: local.to_string(),
        source,
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(local),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(error)?;
    socket
        .bind(&SocketAddr::new(local.ip(), 0).into())
        .map_err(error)?;
    let bound = socket
        .local_addr()
        .map_err(error)?
        .as_socket()
        .ok_or_else(|| error(io::Error::new(ErrorKind::InvalidData, "not an IP socket")))?;
    let registration = own.register(bound);
    socket
        .connect_timeout(&local.into(), timeout)
        .map_err(error)?;
    with_stream(
        socket.into(),
        &local.to_string(),
        None,
        timeout,
        write_timeout,
        Some(registration),
    )
}

fn with_stream(
    tcp: TcpStream,
    address: &str,
    tls: Option<&TlsClient>,
    timeout: Duration,
    write_timeout: Duration,
    registration: Option<OwnLink>,
) -> Result<Link, BridgeError> {
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(timeout))?;
    tcp.set_write_timeout(Some(write_timeout))?;
    let closer = Closer {
        tcp: tcp.try_clone()?,
        _own: registration,
    };
    let Some(tls) = tls else {
        return Ok(Link {
            reader: LinkReader::Plain(tcp.try_clone()?),
            writer: LinkWriter::Plain(tcp),
            closer,
        });
    };
    let mut conn = tls.session()?;
    let mut socket = tcp.try_clone()?;
    while conn.is_handshaking() {
        conn.complete_io(&mut socket)
            .map_err(|e| BridgeError::Tls(format!("handshake with {address}: {e}")))?;
    }
    let conn = Arc::new(Mutex::new(conn));
    Ok(Link {
        reader: LinkReader::Tls {
            tcp: tcp.try_clone()?,
            conn: Arc::clone(&conn),
        },
        writer: LinkWriter::Tls { tcp, conn },
        closer,
    })
}

/// The first address of `address` that accepts a TCP connection within `timeout`.
fn connect_tcp(address: &str, timeout: Duration) -> Result<TcpStream, BridgeError> {
    let resolve = |source| BridgeError::Resolve {
        address: address.to_owned(),
        source,
    };
    let addrs: Vec<_> = address.to_socket_addrs().map_err(resolve)?.collect();
    let mut last = io::Error::new(ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(error) => last = error,
        }
    }
    Err(BridgeError::Connect {
        address: address.to_owned(),
        source: last,
    })
}

fn lock(conn: &Mutex<ClientConnection>) -> MutexGuard<'_, ClientConnection> {
    conn.lock().unwrap_or_else(|e| e.into_inner())
}

impl LinkReader {
    /// Appends what arrives next to `out`; `Ok(0)` when the peer closed.
    pub(crate) fn read_into(&mut self, out: &mut BytesMut) -> io::Result<usize> {
        match self {
            Self::Plain(tcp) => {
                let mut chunk = [0u8; READ_CHUNK];
                let n = tcp.read(&mut chunk)?;
                out.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Self::Tls { tcp, conn } => read_tls(tcp, conn, out),
        }
    }
}

/// One TLS read: plaintext already decrypted, else one socket read fed through the session.
fn read_tls(
    tcp: &mut TcpStream,
    conn: &Mutex<ClientConnection>,
    out: &mut BytesMut,
) -> io::Result<usize> {
    loop {
        let (got, closed) = take_plaintext(&mut lock(conn), out)?;
        if got > 0 || closed {
            return Ok(got);
        }
        let mut raw = [0u8; READ_CHUNK];
        let n = tcp.read(&mut raw)?;
        if n == 0 {
            return Ok(0);
        }
        let mut session = lock(conn);
        let mut received = &raw[..n];
        let mut got = 0;
        while !received.is_empty() {
            session.read_tls(&mut received)?;
            session
                .process_new_packets()
                .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
            got += take_plaintext(&mut session, out)?.0;
        }
        while session.wants_write() {
            session.write_tls(tcp)?;
        }
        if got > 0 {
            return Ok(got);
        }
    }
}

/// Moves the session's decrypted bytes to `out`: how many, and whether the peer closed.
fn take_plaintext(session: &mut ClientConnection, out: &mut BytesMut) -> io::Result<(usize, bool)> {
    let mut chunk = [0u8; READ_CHUNK];
    let mut got = 0;
    loop {
        match session.reader().read(&mut chunk) {
            Ok(0) => return Ok((got, true)),
            Ok(n) => {
                out.extend_from_slice(&chunk[..n]);
                got += n;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((got, false)),
            Err(e) => return Err(e),
        }
    }
}

impl LinkWriter {
    /// Sends `bytes` whole.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Self::Plain(tcp) => tcp.write_all(bytes),
            Self::Tls { tcp, conn } => {
                let mut session = lock(conn);
                session.writer().write_all(bytes)?;
                while session.wants_write() {
                    session.write_tls(tcp)?;
                }
                Ok(())
            }
        }
    }
}
