//! Bridges to other MQTT brokers (`[[bridges]]`, like mosquitto's `connection` blocks).
//!
//! Each bridge runs on its own thread ([`supervisor`]), never on a reactor: it is two MQTT
//! clients written on the codec over blocking sockets, one to the remote broker (TCP or TLS)
//! and one to this broker over loopback (its first TCP listener), each with a reader thread
//! that hands packets to the bridge thread. Messages matching a rule's local filter go out
//! with the local prefix replaced by the remote one; the reverse for remote messages. A QoS
//! 1/2 message is acknowledged to its source only after its destination acknowledged it.
//!
//! While the remote is unreachable the local connection is closed too: the bridge's local
//! session is persistent, so the broker itself queues the QoS 1/2 messages for it (bounded by
//! `[queues]`, stored with `[persistence]`), and re-sends them, in order, when the bridge
//! comes back. See docs/operations.md, "Bridges".
//!
//! This crate knows the broker only as an MQTT server on loopback and a [`BridgeBoard`] the
//! shards read for `$SYS`; it never sees the shard, its sessions or the config file.

#![forbid(unsafe_code)]

mod backoff;
mod echo;
mod error;
mod flow;
mod link;
mod mqtt;
mod session;
pub mod settings;
mod stats;
mod supervisor;
mod tls;
mod topics;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

pub use error::BridgeError;
pub use stats::{BridgeCounters, BridgeStats};

use session::Event;
use settings::BridgeSettings;
use supervisor::Supervisor;

/// Events a bridge's thread holds before its reader threads wait (pushing back on the sockets).
const EVENT_CAPACITY: usize = 1024;
/// Longest a stop (reload, shutdown) waits for a bridge's thread.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One running bridge, as the broker holds it.
struct Running {
    settings: Arc<BridgeSettings>,
    counters: Arc<BridgeCounters>,
    wake: Sender<Event>,
    /// Set to stop: the thread checks it between packets, ticks and connection attempts.
    stop: Arc<AtomicBool>,
    /// Disconnected (or sent to) when the thread ends.
    done: Receiver<()>,
    thread: JoinHandle<()>,
}

impl Running {
    /// Tells the thread to stop and waits for it (the local and remote sessions stay). A
    /// thread still inside a connection attempt (TCP, TLS, CONNACK: at most
    /// `supervisor::CONNECT_TIMEOUT` each) is not waited for beyond [`STOP_WAIT`]: it ends on
    /// its own when the attempt does, without connecting to this broker.
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        // A full channel: the flag is seen at the next packet or tick.
        let _ = self.wake.try_send(Event::Stop);
        match self.done.recv_timeout(STOP_WAIT) {
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(bridge = %self.settings.name, "bridge still connecting; left to end on its own");
            }
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let _ = self.thread.join();
            }
        }
    }
}

/// The running bridges' names and counters, where the shards read them for `$SYS`.
#[derive(Default)]
pub struct BridgeBoard(Mutex<Vec<(Arc<BridgeSettings>, Arc<BridgeCounters>)>>);

impl broker_api::BridgeFigures for BridgeBoard {
    /// Every running bridge's figures now, in config order.
    fn stats(&self) -> Vec<BridgeStats> {
        let board = self.0.lock().unwrap_or_else(|e| e.into_inner());
        board
            .iter()
            .map(|(settings, counters)| counters.snapshot(&settings.name))
            .collect()
    }
}

impl BridgeBoard {
    fn set(&self, running: &[Running]) {
        let entries = running
            .iter()
            .map(|r| (Arc::clone(&r.settings), Arc::clone(&r.counters)))
            .collect();
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = entries;
    }
}

/// Every bridge of a broker: started with it, changed on reload, stopped with it.
pub struct Bridges {
    /// Shared with the shards (`$SYS`).
    board: Arc<BridgeBoard>,
    /// Where the bridges reach this broker (`None`: no TCP listener; config validation
    /// refuses bridges then).
    local: Option<SocketAddr>,
    /// Where the local connections register their source addresses (the `[ip]` guard's).
    own: Arc<broker_api::OwnLinks>,
    running: Mutex<Vec<Running>>,
}

impl Bridges {
    /// Starts every configured bridge; they reach this broker at `local` (its first TCP
    /// listener's bound address), from source addresses they register in `own` (the `[ip]`
    /// guard neither limits nor bans them).
    pub fn start(
        settings: &[BridgeSettings],
        local: Option<SocketAddr>,
        own: Arc<broker_api::OwnLinks>,
        board: Arc<BridgeBoard>,
    ) -> Self {
        let bridges = Self {
            board,
            local: local.map(loopback),
            own,
            running: Mutex::new(Vec::new()),
        };
        bridges.update(settings);
        bridges
    }

    fn running(&self) -> MutexGuard<'_, Vec<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a reloaded `[[bridges]]` list: bridges no longer listed stop, new ones start,
    /// changed ones restart (with a fresh local session: their old subscriptions go); unchanged
    /// ones keep running untouched.
    pub fn update(&self, settings: &[BridgeSettings]) {
        let mut running = self.running();
        let (keep, stop): (Vec<Running>, Vec<Running>) = std::mem::take(&mut *running)
            .into_iter()
            .partition(|r| settings.iter().any(|s| *s == *r.settings));
        let changed: Vec<String> = stop.iter().map(|r| r.settings.name.clone()).collect();
        for bridge in stop {
            tracing::info!(bridge = %bridge.settings.name, "bridge stopping");
            bridge.stop();
        }
        *running = keep;
        for bridge in settings {
            if running.iter().any(|r| r.settings.name == bridge.name) {
                continue;
            }
            let fresh = changed.contains(&bridge.name);
            match self.spawn(bridge, fresh) {
                Ok(started) => running.push(started),
                Err(error) => {
                    tracing::error!(bridge = %bridge.name, %error, "could not start the bridge's thread");
                }
            }
        }
        running.sort_by_key(|r| settings.iter().position(|s| s.name == r.settings.name));
        self.board.set(&running);
    }

    fn spawn(&self, settings: &BridgeSettings, fresh_local: bool) -> std::io::Result<Running> {
        let local = self.local.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the broker has no TCP listener",
            )
        })?;
        let settings = Arc::new(settings.clone());
        let counters = Arc::new(BridgeCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, events) = crossbeam_channel::bounded(EVENT_CAPACITY);
        let (done_sender, done) = crossbeam_channel::bounded(1);
        let supervisor = Supervisor {
            settings: Arc::clone(&settings),
            counters: Arc::clone(&counters),
            local,
            own: Arc::clone(&self.own),
            events,
            sender: sender.clone(),
            stop: Arc::clone(&stop),
            fresh_local,
            marker_ok: true,
            epoch: 0,
        };
        let thread = std::thread::Builder::new()
            .name(format!("bridge-{}", settings.name))
            .spawn(move || {
                supervisor.run();
                let _ = done_sender.send(());
            })?;
        Ok(Running {
            settings,
            counters,
            wake: sender,
            stop,
            done,
            thread,
        })
    }

    /// Every bridge's figures now, in config order.
    pub fn stats(&self) -> Vec<BridgeStats> {
        broker_api::BridgeFigures::stats(&*self.board)
    }

    /// Stops every bridge (DISCONNECT to both brokers) and waits for their threads.
    pub fn stop_all(&self) {
        let running = std::mem::take(&mut *self.running());
        self.board.set(&[]);
        for bridge in running {
            bridge.stop();
        }
    }
}

impl Drop for Bridges {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// Where to reach a listener bound to `addr`: itself, or loopback for an unspecified address.
fn loopback(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

#[cfg(test)]
mod tests {
    use super::loopback;

    #[test]
    fn a_listener_on_every_address_is_reached_over_loopback() {
        let cases = [
            ("0.0.0.0:1883", "127.0.0.1:1883"),
            ("[::]:1883", "[::1]:1883"),
            ("10.1.2.3:1883", "10.1.2.3:1883"),
        ];
        for (bound, reached) in cases {
            assert_eq!(loopback(bound.parse().unwrap()), reached.parse().unwrap());
        }
    }
}
