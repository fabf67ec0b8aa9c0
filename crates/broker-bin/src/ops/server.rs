//! The listener's threads: one blocking acceptor, and one thread per connection up to
//! `http.max_connections` (a connection beyond it is answered 503 and closed). Scrapes and admin
//! calls are rare and short, so a thread each costs nothing that matters, keeps a slow client
//! from holding up the others (each read is bounded by `http.read_timeout_ms`), and never
//! touches a reactor: every answer is read from atomics or asked of the shards by mail.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use tracing::{debug, warn};

use super::credentials::Credentials;
use super::request::{Limits, read_request};
use super::response::Response;
use super::routes::route;
use super::state::OpsState;
use crate::config::HttpSettings;

/// How long a refused or closing connection's unread input is waited for (each read).
const REFUSE_WAIT: Duration = Duration::from_millis(50);

/// How long stopping waits for connection threads to finish after their sockets were shut.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// What the acceptor and every connection thread share.
pub(super) struct Server {
    pub(super) state: OpsState,
    pub(super) credentials: Credentials,
    pub(super) tls: Option<Arc<ServerConfig>>,
    pub(super) limits: Limits,
    pub(super) read_timeout: Duration,
    pub(super) max_connections: usize,
    pub(super) stopping: AtomicBool,
    /// Open connections by id: a clone of each socket, shut down to stop the server.
    active: Mutex<HashMap<u64, TcpStream>>,
    /// Signalled whenever a connection ends.
    ended: Condvar,
    next_id: AtomicU64,
}

impl Server {
    pub(super) fn new(
        state: OpsState,
        settings: &HttpSettings,
        tls: Option<Arc<ServerConfig>>,
    ) -> Self {
        Self {
            state,
            credentials: Credentials::new(settings),
            tls,
            limits: Limits {
                max_head: settings.max_head_bytes,
                max_body: settings.max_body_bytes,
            },
            read_timeout: settings.read_timeout,
            max_connections: settings.max_connections,
            stopping: AtomicBool::new(false),
            active: Mutex::new(HashMap::new()),
            ended: Condvar::new(),
            next_id: AtomicU64::new(0),
        }
    }

    fn active(&self) -> MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.active.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Accepts until [`Self::stop`]; runs on the acceptor thread.
    pub(super) fn accept_loop(self: &Arc<Self>, listener: &TcpListener) {
        for stream in listener.incoming() {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            match stream {
                Ok(stream) => self.admit(stream),
                Err(error) => {
                    // Out of descriptors, usually: wait instead of spinning.
                    warn!(%error, "operations listener: accept failed");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    /// Serves `stream` on a thread of its own, or answers 503 when the bound is reached.
    fn admit(self: &Arc<Self>, stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(self.read_timeout));
        let _ = stream.set_write_timeout(Some(self.read_timeout));
        let _ = stream.set_nodelay(true);
        let Some(id) = self.register(&stream) else {
            debug!("operations listener: http.max_connections reached, answering 503");
            self.refuse(stream);
            return;
        };
        let server = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("ringmq-http".into())
            .spawn(move || {
                server.serve(stream);
                server.unregister(id);
            });
        if let Err(error) = spawned {
            warn!(%error, "operations listener: cannot start a connection thread");
            self.unregister(id);
        }
    }

    /// Counts a connection in; `None` beyond `max_connections`.
    fn register(&self, stream: &TcpStream) -> Option<u64> {
        let mut active = self.active();
        if active.len() >= self.max_connections {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        active.insert(id, stream.try_clone().ok()?);
        Some(id)
    }

    fn unregister(&self, id: u64) {
        self.active().remove(&id);
        self.ended.notify_all();
    }

    /// 503 on a plain listener; a TLS one just closes (an answer would need a handshake).
    /// Runs on the acceptor, so its waits are short ([`REFUSE_WAIT`]).
    fn refuse(&self, mut stream: TcpStream) {
        if self.tls.is_some() {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let _ = stream.set_read_timeout(Some(REFUSE_WAIT));
        // Take the request that is likely in already, so the close sends no reset.
        let _ = stream.read(&mut [0; 4096]);
        let busy = Response::text(503, "too many connections\n");
        let _ = busy.write_to(&mut stream, true, false);
        linger(&mut stream);
    }

    /// Serves one connection until it closes, fails or asks to close.
    fn serve(&self, stream: TcpStream) {
        let Some(tls) = &self.tls else {
            self.exchange(stream, linger);
            return;
        };
        match ServerConnection::new(Arc::clone(tls)) {
            Ok(connection) => self.exchange(StreamOwned::new(connection, stream), |tls| {
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }),
            Err(error) => warn!(%error, "operations listener: TLS session"),
        }
    }

    /// Reads requests and writes their answers; `finish` ends the stream cleanly.
    fn exchange<S: Read + Write>(&self, stream: S, finish: impl FnOnce(&mut S)) {
        let mut reader = BufReader::new(stream);
        loop {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            let request = match read_request(&mut reader, self.limits, || {}) {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(error) => {
                    debug!(%error, "operations listener: bad request");
                    if let Some(status) = error.status() {
                        let _ = Response::error(status).write_to(reader.get_mut(), true, false);
                    }
                    break;
                }
            };
            let response = route(&self.state, &self.credentials, &request);
            let head_only = request.method == "HEAD";
            if response
                .write_to(reader.get_mut(), request.close, head_only)
                .is_err()
                || request.close
            {
                break;
            }
        }
        finish(reader.get_mut());
    }

    /// Stops accepting, shuts every open connection and waits (boundedly) for their threads.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        for stream in self.active().values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let active = self.active();
        let (active, _) = self
            .ended
            .wait_timeout_while(active, STOP_WAIT, |active| !active.is_empty())
            .unwrap_or_else(PoisonError::into_inner);
        if !active.is_empty() {
            warn!(
                open = active.len(),
                "operations listener: connections still open at stop"
            );
        }
    }
}

/// Ends a plain connection gracefully: no more writes, then what the peer still sends is read
/// and discarded (briefly), so closing with unread bytes does not reset the connection before
/// the peer has read the last answer (RFC 9112 9.6).
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(REFUSE_WAIT));
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// Wakes an acceptor blocked in `accept` on `addr` (a wildcard address through loopback);
/// whether the connection was made.
pub(super) fn wake(addr: SocketAddr) -> bool {
    let mut target = addr;
    if addr.ip().is_unspecified() {
        target.set_ip(match addr {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    TcpStream::connect_timeout(&target, Duration::from_secs(1)).is_ok()
}

/// Runs `server`'s acceptor on its own thread.
pub(super) fn spawn_acceptor(
    server: Arc<Server>,
    listener: TcpListener,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("ringmq-http-accept".into())
        .spawn(move || server.accept_loop(&listener))
}
