//! Live traces (docs/operations.md, "Traces"): the admin API starts a trace of one client id,
//! username, topic filter or address, for a bounded time and size; every packet of that
//! traffic, in and out, is written as one line into the trace's log, which the API serves
//! (whole, or from an offset: the live view). When no trace runs, a packet costs one load of
//! its shard's `TraceBook::active` flag, and a CONNECT one relaxed load of
//! [`Traces::identity_traces`].

mod line;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use router::TopicFilter;
use transport::Cidr;

pub use line::{Direction, PacketLine, packet_line, publish_line, short_ack_line};

/// What a trace follows.
#[derive(Debug, Clone)]
pub enum TraceTarget {
    ClientId(String),
    Username(String),
    /// PUBLISH packets (in and out) whose topic matches, on any connection.
    Topic(TopicFilter),
    /// Connections from these addresses.
    Address(Cidr),
}

/// A trace as asked for.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    pub target: TraceTarget,
    /// How long it runs.
    pub duration: Duration,
    /// The most log bytes it keeps; beyond, lines are counted, not kept.
    pub max_bytes: usize,
    /// Leading payload bytes shown per PUBLISH (hex), 0 for none.
    pub payload_bytes: usize,
}

/// `[traces]`: the bounds every trace request is held to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLimits {
    /// Traces kept at once (running or finished; the oldest finished one makes room).
    pub max_traces: usize,
    /// The largest `max_bytes` a trace may ask for.
    pub max_bytes: usize,
    /// The longest a trace may run.
    pub max_duration: Duration,
}

impl Default for TraceLimits {
    fn default() -> Self {
        Self {
            max_traces: 8,
            max_bytes: 16 << 20,
            max_duration: Duration::from_secs(3600),
        }
    }
}

/// Why a trace was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceRefused {
    #[error("{0} traces are running already ([traces] max_traces)")]
    TooMany(usize),
    #[error("max_bytes {asked} is over [traces] max_bytes ({limit})")]
    TooLarge { asked: usize, limit: usize },
    #[error("{asked} s is longer than [traces] max_seconds ({limit} s)")]
    TooLong { asked: u64, limit: u64 },
}

/// One trace and its log.
#[derive(Debug)]
pub struct Trace {
    pub id: u64,
    pub spec: TraceSpec,
    /// When it started (wall clock, for the API).
    pub started: SystemTime,
    until: Instant,
    /// Stopped through the API before its time.
    stopped: std::sync::atomic::AtomicBool,
    log: Mutex<TraceLog>,
}

#[derive(Debug, Default)]
struct TraceLog {
    text: String,
    /// Lines not kept: the log was full.
    dropped: u64,
    lines: u64,
}

/// What the API shows of a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceView {
    pub id: u64,
    pub target: String,
    pub running: bool,
    pub started_unix_ms: u64,
    pub bytes: usize,
    pub lines: u64,
    pub dropped_lines: u64,
}

impl Trace {
    pub fn running(&self, now: Instant) -> bool {
        now < self.until && !self.stopped.load(Ordering::Relaxed)
    }

    /// Appends one line (kept while under `max_bytes`; nothing once the trace ended).
    pub fn write(&self, line: &str) {
        if !self.running(Instant::now()) {
            return;
        }
        let mut log = lock(&self.log);
        log.lines += 1;
        if log.text.len() + line.len() + 1 > self.spec.max_bytes {
            log.dropped += 1;
            return;
        }
        log.text.push_str(line);
        log.text.push('\n');
    }

    /// The log from byte `from` (a line boundary the API gave out), and where it ends.
    pub fn read(&self, from: usize) -> (String, usize) {
        let log = lock(&self.log);
        let from = from.min(log.text.len());
        (log.text[from..].to_owned(), log.text.len())
    }

    pub fn view(&self, now: Instant) -> TraceView {
        let log = lock(&self.log);
        TraceView {
            id: self.id,
            target: describe(&self.spec.target),
            running: self.running(now),
            started_unix_ms: self
                .started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            bytes: log.text.len(),
            lines: log.lines,
            dropped_lines: log.dropped,
        }
    }
}

/// `client_id:x`, `username:u`, `topic:a/#`, `address:10.0.0.0/8`.
pub fn describe(target: &TraceTarget) -> String {
    match target {
        TraceTarget::ClientId(id) => format!("client_id:{id}"),
        TraceTarget::Username(user) => format!("username:{user}"),
        TraceTarget::Topic(filter) => format!("topic:{}", filter.as_str()),
        TraceTarget::Address(cidr) => format!("address:{cidr}"),
    }
}

/// Every trace of the broker (shared by the shards and the admin API).
#[derive(Debug, Default)]
pub struct Traces {
    limits: TraceLimits,
    list: Mutex<Vec<Arc<Trace>>>,
    next_id: AtomicU64,
    /// Bumped at each start and stop: a shard that sees it move re-marks its connections.
    generation: AtomicU64,
    /// Running topic traces (the per-PUBLISH check is skipped while 0).
    topic_traces: AtomicUsize,
    /// Running client id, username and address traces (the check at CONNECT is skipped
    /// while 0).
    identity_traces: AtomicUsize,
}

/// A connection's identity, for matching traces.
#[derive(Debug, Clone, Copy)]
pub struct Identity<'a> {
    pub client_id: Option<&'a str>,
    pub username: Option<&'a str>,
    pub address: Option<IpAddr>,
}

impl Traces {
    pub fn new(limits: TraceLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// Starts a trace; its id.
    pub fn start(&self, spec: TraceSpec, now: Instant) -> Result<u64, TraceRefused> {
        let limits = &self.limits;
        if spec.max_bytes > limits.max_bytes {
            let (asked, limit) = (spec.max_bytes, limits.max_bytes);
            return Err(TraceRefused::TooLarge { asked, limit });
        }
        if spec.duration > limits.max_duration {
            let (asked, limit) = (spec.duration.as_secs(), limits.max_duration.as_secs());
            return Err(TraceRefused::TooLong { asked, limit });
        }
        let mut list = lock(&self.list);
        if list.len() >= limits.max_traces {
            match list.iter().position(|t| !t.running(now)) {
                Some(finished) => drop(list.remove(finished)),
                None => return Err(TraceRefused::TooMany(list.len())),
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let until = now + spec.duration;
        list.push(Arc::new(Trace {
            id,
            spec,
            started: SystemTime::now(),
            until,
            stopped: std::sync::atomic::AtomicBool::new(false),
            log: Mutex::default(),
        }));
        self.changed(&list, now);
        Ok(id)
    }

    /// Stops trace `id` now (its log stays until deleted or replaced); whether it existed.
    pub fn stop(&self, id: u64, now: Instant) -> bool {
        let list = lock(&self.list);
        let Some(trace) = list.iter().find(|t| t.id == id) else {
            return false;
        };
        trace.stopped.store(true, Ordering::Relaxed);
        self.changed(&list, now);
        true
    }

    /// Forgets trace `id`; whether it existed.
    pub fn delete(&self, id: u64, now: Instant) -> bool {
        let mut list = lock(&self.list);
        let before = list.len();
        list.retain(|t| t.id != id);
        let removed = list.len() != before;
        if removed {
            self.changed(&list, now);
        }
        removed
    }

    pub fn get(&self, id: u64) -> Option<Arc<Trace>> {
        lock(&self.list).iter().find(|t| t.id == id).cloned()
    }

    pub fn views(&self, now: Instant) -> Vec<TraceView> {
        lock(&self.list).iter().map(|t| t.view(now)).collect()
    }

    /// Bumped at each start and stop (and when a running trace is found past its end).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a topic trace runs (one relaxed load per PUBLISH).
    #[inline]
    pub fn topic_traces(&self) -> bool {
        self.topic_traces.load(Ordering::Relaxed) != 0
    }

    /// Whether a client id, username or address trace runs (one relaxed load per CONNECT).
    #[inline]
    pub fn identity_traces(&self) -> bool {
        self.identity_traces.load(Ordering::Relaxed) != 0
    }

    /// The running traces that follow a connection with `identity`.
    pub fn following(&self, identity: Identity<'_>, now: Instant) -> Vec<Arc<Trace>> {
        lock(&self.list)
            .iter()
            .filter(|t| t.running(now) && follows(&t.spec.target, identity))
            .cloned()
            .collect()
    }

    /// The running topic traces whose filter matches `topic`.
    pub fn on_topic(&self, topic: &str, now: Instant) -> Vec<Arc<Trace>> {
        lock(&self.list)
            .iter()
            .filter(|t| t.running(now))
            .filter(|t| matches!(&t.spec.target, TraceTarget::Topic(f) if f.matches_text(topic)))
            .cloned()
            .collect()
    }

    /// Ends the bookkeeping of traces past their time (the shards' gauge tick calls it).
    pub fn expire(&self, now: Instant) {
        let list = lock(&self.list);
        let (topics, identities) = count_running(&list, now);
        if topics != self.topic_traces.load(Ordering::Relaxed)
            || identities != self.identity_traces.load(Ordering::Relaxed)
        {
            self.changed(&list, now);
        }
    }

    fn changed(&self, list: &[Arc<Trace>], now: Instant) {
        let (topics, identities) = count_running(list, now);
        self.topic_traces.store(topics, Ordering::Relaxed);
        self.identity_traces.store(identities, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// Running topic traces, and running client id, username and address traces.
fn count_running(list: &[Arc<Trace>], now: Instant) -> (usize, usize) {
    let running = list.iter().filter(|t| t.running(now));
    running.fold((0, 0), |(topics, identities), t| match t.spec.target {
        TraceTarget::Topic(_) => (topics + 1, identities),
        _ => (topics, identities + 1),
    })
}

fn follows(target: &TraceTarget, identity: Identity<'_>) -> bool {
    match target {
        TraceTarget::ClientId(id) => identity.client_id == Some(id.as_str()),
        TraceTarget::Username(user) => identity.username == Some(user.as_str()),
        TraceTarget::Address(cidr) => identity.address.is_some_and(|ip| cidr.contains(ip)),
        TraceTarget::Topic(_) => false,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
