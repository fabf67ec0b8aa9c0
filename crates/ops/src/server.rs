//! The listener's threads: one blocking acceptor, and one thread per connection up to
//! `http.max_connections`. Scrapes and admin calls are rare and short, so a thread each costs
//! nothing that matters, keeps a slow client from holding up the others, and never touches a
//! reactor: every answer is read from atomics or asked of the shards by mail.
//!
//! Slow clients (slowloris) cannot hold the listener:
//! - a request's head must arrive whole within `http.header_timeout_ms` of when the server
//!   starts waiting for it (a deadline, not a per-read timeout: a byte now and then does not
//!   extend it), or it is answered 408 and closed; every other read waits at most
//!   `http.read_timeout_ms`;
//! - when all `max_connections` are taken, a new connection closes the one that has waited
//!   longest for its request (its head or its body: an idle keep-alive connection, a trickling
//!   client), as nginx reuses idle connections when it runs out of them. Only when every
//!   connection is still answering a request after a short grace (200 ms) is the newcomer
//!   answered 503 and closed. So `/healthz` stays answerable under a flood of slow
//!   connections: a health check sends its request at once, and is answered before a trickling
//!   newcomer could close it.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use tracing::{debug, warn};

use super::credentials::Credentials;
use super::guard::Guard;
use super::history::{self, History};
use super::port::OpsPort;
use super::request::{Limits, read_request};
use super::response::Response;
use super::routes::{Routes, route};
use super::settings::HttpSettings;

/// How long a refused or closing connection's unread input is waited for (each read).
const REFUSE_WAIT: Duration = Duration::from_millis(50);
/// How long a newcomer waits for a slot while every connection is answering (answers take
/// milliseconds; a keep-alive connection is answering until it waits for its next request).
const ANSWER_GRACE: Duration = Duration::from_millis(200);

/// How long stopping waits for connection threads to finish after their sockets were shut.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Where a connection is, for the choice of one to close when all are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request, its head or its body: may be closed for a newcomer.
    Receiving,
    /// Answering a request (routing it, writing the answer): left alone.
    Answering,
    /// Closed for a newcomer; its thread is ending.
    Evicted,
}

/// One open connection.
struct Slot {
    /// A clone of its socket, shut down to stop the server or to evict it.
    stream: TcpStream,
    phase: Phase,
    /// When `phase` began.
    since: Instant,
}

/// What the acceptor and every connection thread share.
pub(super) struct Server {
    pub(super) port: Arc<dyn OpsPort>,
    pub(super) credentials: Credentials,
    pub(super) guard: Guard,
    /// The dashboard's last hour of figures.
    pub(super) history: Arc<History>,
    pub(super) tls: Option<Arc<ServerConfig>>,
    pub(super) limits: Limits,
    pub(super) read_timeout: Duration,
    pub(super) header_timeout: Duration,
    pub(super) max_connections: usize,
    pub(super) stopping: AtomicBool,
    /// Open connections by id.
    active: Mutex<HashMap<u64, Slot>>,
    /// Signalled whenever a connection ends.
    ended: Condvar,
    next_id: AtomicU64,
}

impl Server {
    pub(super) fn new(
        port: Arc<dyn OpsPort>,
        settings: &HttpSettings,
        tls: Option<Arc<ServerConfig>>,
    ) -> Self {
        Self {
            port,
            credentials: Credentials::new(settings),
            guard: Guard::new(settings, tls.is_some()),
            history: Arc::new(History::new(history::CAPACITY, settings.history_interval)),
            tls,
            limits: Limits {
                max_head: settings.max_head_bytes,
                max_body: settings.max_body_bytes,
            },
            read_timeout: settings.read_timeout,
            header_timeout: settings.header_timeout,
            max_connections: settings.max_connections,
            stopping: AtomicBool::new(false),
            active: Mutex::new(HashMap::new()),
            ended: Condvar::new(),
            next_id: AtomicU64::new(0),
        }
    }

    fn active(&self) -> MutexGuard<'_, HashMap<u64, Slot>> {
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

    /// Serves `stream` on a thread of its own, or answers 503 when every connection is
    /// answering a request.
    fn admit(self: &Arc<Self>, stream: TcpStream) {
        let _ = stream.set_read_timeout(Some(self.read_timeout));
        let _ = stream.set_write_timeout(Some(self.read_timeout));
        let _ = stream.set_nodelay(true);
        let Some(id) = self.register_within(&stream, ANSWER_GRACE) else {
            debug!("operations listener: http.max_connections all answering, answering 503");
            self.refuse(stream);
            return;
        };
        let server = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("ringmq-http".into())
            .spawn(move || {
                server.serve(id, stream);
                server.unregister(id);
            });
        if let Err(error) = spawned {
            warn!(%error, "operations listener: cannot start a connection thread");
            self.unregister(id);
        }
    }

    /// [`Self::register`], tried again for up to `grace` while every connection is answering:
    /// a keep-alive connection that has just written its answer counts as answering until its
    /// thread starts waiting for the next request, a moment later.
    fn register_within(&self, stream: &TcpStream, grace: Duration) -> Option<u64> {
        let until = Instant::now() + grace;
        loop {
            if let Some(id) = self.register(stream) {
                return Some(id);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Counts a connection in: beyond `max_connections`, in place of the one that has waited
    /// longest for its request; `None` when every one is answering.
    fn register(&self, stream: &TcpStream) -> Option<u64> {
        let stream = stream.try_clone().ok()?;
        let mut active = self.active();
        if !make_room(&mut active, self.max_connections) {
            return None;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let slot = Slot {
            stream,
            phase: Phase::Receiving,
            since: Instant::now(),
        };
        active.insert(id, slot);
        Some(id)
    }

    /// Moves connection `id` to `phase`; `false` once it has been evicted (its socket is shut:
    /// it must not act on a request it may have read whole).
    fn enter(&self, id: u64, phase: Phase) -> bool {
        match self.active().get_mut(&id) {
            Some(slot) if slot.phase != Phase::Evicted => {
                slot.phase = phase;
                slot.since = Instant::now();
                true
            }
            _ => false,
        }
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

    /// Serves connection `id` until it closes, fails, asks to close or is evicted.
    fn serve(&self, id: u64, stream: TcpStream) {
        let local = match stream.local_addr() {
            Ok(local) => local,
            Err(error) => {
                debug!(%error, "operations listener: connection gone");
                return;
            }
        };
        let connection = Connection {
            id,
            local,
            deadline: Rc::new(Cell::new(None)),
        };
        let socket = DeadlineSocket {
            stream,
            read_timeout: self.read_timeout,
            deadline: Rc::clone(&connection.deadline),
        };
        let Some(tls) = &self.tls else {
            self.exchange(&connection, socket, |socket| linger(&mut socket.stream));
            return;
        };
        match ServerConnection::new(Arc::clone(tls)) {
            Ok(session) => {
                let stream = StreamOwned::new(session, socket);
                self.exchange(&connection, stream, |tls| {
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                });
            }
            Err(error) => warn!(%error, "operations listener: TLS session"),
        }
    }

    /// Reads requests and writes their answers; `finish` ends the stream cleanly.
    fn exchange<S: Read + Write>(
        &self,
        connection: &Connection,
        stream: S,
        finish: impl FnOnce(&mut S),
    ) {
        let deadline = &connection.deadline;
        let mut reader = BufReader::new(stream);
        loop {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            // The head deadline runs from now (a TLS handshake included); the body's reads are
            // bounded by the read timeout alone.
            deadline.set(Some(Instant::now() + self.header_timeout));
            if !self.enter(connection.id, Phase::Receiving) {
                break;
            }
            let read = read_request(&mut reader, self.limits, || deadline.set(None));
            deadline.set(None);
            let request = match read {
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
            if !self.enter(connection.id, Phase::Answering) {
                break;
            }
            let routes = Routes {
                port: &*self.port,
                credentials: &self.credentials,
                history: &self.history,
            };
            let response = self
                .guard
                .refuse(&request, connection.local)
                .unwrap_or_else(|| route(&routes, &request));
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
        self.history.stop();
        for slot in self.active().values() {
            let _ = slot.stream.shutdown(Shutdown::Both);
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

/// Makes room in `active` for one more connection, `max` at most: when all are taken, the one
/// that has waited longest for its request is evicted (its socket shut down, so its thread's
/// read ends). `false` when every one is answering a request.
fn make_room(active: &mut HashMap<u64, Slot>, max: usize) -> bool {
    let open = active
        .values()
        .filter(|slot| slot.phase != Phase::Evicted)
        .count();
    if open < max {
        return true;
    }
    // Evicted threads end at once (their reads fail); never let them pile up anyway.
    if active.len() >= 2 * max {
        return false;
    }
    let Some((victim, slot)) = active
        .iter_mut()
        .filter(|(_, slot)| slot.phase == Phase::Receiving)
        .min_by_key(|(_, slot)| slot.since)
    else {
        return false;
    };
    debug!(
        connection = victim,
        waited_ms = slot.since.elapsed().as_millis() as u64,
        "operations listener: http.max_connections reached, closing the connection waiting \
         longest for its request"
    );
    slot.phase = Phase::Evicted;
    let _ = slot.stream.shutdown(Shutdown::Both);
    true
}

/// One connection, as its thread knows it.
struct Connection {
    id: u64,
    /// The address the client connected to (for the `Host` check).
    local: SocketAddr,
    /// When the request head being read must be in by; `None` outside a head.
    deadline: Rc<Cell<Option<Instant>>>,
}

/// A connection's socket whose reads stop at the head deadline: each read waits at most the
/// time left (and at most the read timeout). Under TLS it is the socket below the session, so
/// the handshake and every record count.
struct DeadlineSocket {
    stream: TcpStream,
    read_timeout: Duration,
    deadline: Rc<Cell<Option<Instant>>>,
}

impl Read for DeadlineSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let wait = match self.deadline.get() {
            None => self.read_timeout,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request head not in within http.header_timeout_ms",
                    ));
                }
                left.min(self.read_timeout)
            }
        };
        self.stream.set_read_timeout(Some(wait))?;
        self.stream.read(buf)
    }
}

impl Write for DeadlineSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stream.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `phases` as slots over real sockets, the first waiting longest; and the client ends.
    fn slots(phases: &[Phase]) -> (HashMap<u64, Slot>, Vec<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = listener.local_addr().expect("bound");
        let start = Instant::now();
        let mut active = HashMap::new();
        let mut clients = Vec::new();
        for (id, phase) in phases.iter().enumerate() {
            clients.push(TcpStream::connect(addr).expect("connects"));
            let (stream, _) = listener.accept().expect("accepts");
            let since = start + Duration::from_millis(id as u64);
            let phase = *phase;
            active.insert(
                id as u64,
                Slot {
                    stream,
                    phase,
                    since,
                },
            );
        }
        (active, clients)
    }

    fn phase(active: &HashMap<u64, Slot>, id: u64) -> Phase {
        active[&id].phase
    }

    #[test]
    fn below_the_bound_nobody_is_evicted() {
        let (mut active, _clients) = slots(&[Phase::Receiving, Phase::Receiving]);
        assert!(make_room(&mut active, 3));
        assert_eq!(phase(&active, 0), Phase::Receiving);
    }

    #[test]
    fn at_the_bound_the_longest_waiting_receiver_is_shut() {
        use Phase::{Answering, Receiving};
        let (mut active, mut clients) = slots(&[Answering, Receiving, Receiving]);
        assert!(make_room(&mut active, 3));
        assert_eq!(phase(&active, 0), Answering, "answering: left alone");
        assert_eq!(phase(&active, 1), Phase::Evicted, "waited longest");
        assert_eq!(phase(&active, 2), Receiving);
        let read = clients[1].read(&mut [0; 1]).expect("a clean close");
        assert_eq!(read, 0);
        // The evicted one no longer counts: two open, so at a bound of 2 the next goes.
        assert!(make_room(&mut active, 2));
        assert_eq!(phase(&active, 2), Phase::Evicted);
    }

    #[test]
    fn when_all_are_answering_there_is_no_room() {
        let (mut active, _clients) = slots(&[Phase::Answering, Phase::Answering]);
        assert!(!make_room(&mut active, 2));
        let (mut active, _clients) = slots(&[Phase::Receiving, Phase::Evicted, Phase::Evicted]);
        assert!(
            !make_room(&mut active, 1),
            "evicted threads not gone yet: bounded"
        );
    }
}
