//! A TCP relay on loopback between a node and a NATS server, which the fault suite opens,
//! cuts, pauses or slows: the network faults of issue 48's Jepsen-style suite.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What the relay does with the bytes of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forwarded as they come.
    Open,
    /// Held (not read further: TCP pushes back), forwarded intact once open again.
    Paused,
    /// Each chunk forwarded this much later.
    Slow(Duration),
    /// Every connection closed, new ones closed at once.
    Cut,
}

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    /// Both ends of each relayed connection, to close them on a cut.
    connections: HashMap<u64, [TcpStream; 2]>,
    next: u64,
    stopped: bool,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// A relay to one target, listening on its own loopback port.
pub struct Relay {
    addr: SocketAddr,
    shared: Shared,
}

impl Relay {
    /// A relay to `target`, open.
    pub fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("the relay's address");
        let shared: Shared = Arc::default();
        lock(&shared).mode = Some(Mode::Open);
        let accepting = Arc::clone(&shared);
        std::thread::spawn(move || accept(&listener, target, &accepting));
        Self { addr, shared }
    }

    /// Where a node connects to reach the target.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Applies `mode` from now on (a cut closes every connection).
    pub fn set(&self, mode: Mode) {
        let mut state = lock(&self.shared);
        state.mode = Some(mode);
        if mode == Mode::Cut {
            for [a, b] in state.connections.values() {
                let _ = a.shutdown(Shutdown::Both);
                let _ = b.shutdown(Shutdown::Both);
            }
        }
        self.shared.1.notify_all();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.set(Mode::Cut);
        lock(&self.shared).stopped = true;
        // Wakes the accepting thread, which then sees `stopped`.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.0.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept(listener: &TcpListener, target: SocketAddr, shared: &Shared) {
    for client in listener.incoming() {
        if lock(shared).stopped {
            return;
        }
        let Ok(client) = client else { continue };
        if lock(shared).mode == Some(Mode::Cut) {
            continue;
        }
        let Ok(server) = TcpStream::connect_timeout(&target, Duration::from_secs(1)) else {
            continue;
        };
        let _ = (client.set_nodelay(true), server.set_nodelay(true));
        let (Ok(c2), Ok(s2), Ok(c3), Ok(s3)) = (
            client.try_clone(),
            server.try_clone(),
            client.try_clone(),
            server.try_clone(),
        ) else {
            continue;
        };
        let id = {
            let mut state = lock(shared);
            state.next += 1;
            let id = state.next;
            state.connections.insert(id, [c3, s3]);
            id
        };
        let (up, down) = (Arc::clone(shared), Arc::clone(shared));
        std::thread::spawn(move || pump(client, server, &up, id));
        std::thread::spawn(move || pump(s2, c2, &down, id));
    }
}

/// Forwards `from` to `to` as the mode says, until either side closes or the relay cuts.
fn pump(mut from: TcpStream, mut to: TcpStream, shared: &Shared, id: u64) {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mode = {
            let state = lock(shared);
            let state = shared
                .1
                .wait_while(state, |s| s.mode == Some(Mode::Paused) && !s.stopped)
                .unwrap_or_else(PoisonError::into_inner);
            state.mode
        };
        match mode {
            Some(Mode::Cut) | None => break,
            Some(Mode::Slow(delay)) => std::thread::sleep(delay),
            Some(Mode::Open | Mode::Paused) => {}
        }
        if to.write_all(&chunk[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
    lock(shared).connections.remove(&id);
}
