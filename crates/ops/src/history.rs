//! The dashboard's last hour (`GET /api/v1/history`): a sampler thread of the listener reads
//! the `/metrics` document every `http.history_interval_ms` (5 s by default) and keeps a few of
//! its figures in a ring of [`CAPACITY`] points (an hour at 5 s), oldest dropped first: nothing
//! grows, and nothing is kept on disk. Counters are kept as they are read; the page turns two
//! points into a rate.
//!
//! The figures are read by their names in the document the broker writes
//! (`ringmq_listener_connections_open`, ...), so the listener needs nothing more of the broker
//! than [`OpsPort::metrics`]; a family the document lacks reads as absent.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::port::OpsPort;
use crate::scrape::Scrape;

/// How many points are kept: an hour at the default interval of 5 s.
pub const CAPACITY: usize = 720;

/// One sample of the figures the overview charts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Point {
    /// Unix time of the sample, in milliseconds.
    pub t: u64,
    /// Open client sockets by listener kind (`ringmq_listener_connections_open`).
    pub connections: BTreeMap<String, f64>,
    /// Sessions held (`ringmq_sessions`).
    pub sessions: f64,
    /// PUBLISH packets received so far (`ringmq_messages_received_total`).
    pub received: f64,
    /// PUBLISH packets sent so far (`ringmq_messages_sent_total`).
    pub sent: f64,
    /// Message copies dropped so far, by reason (`ringmq_message_drops_total`).
    pub drops: BTreeMap<String, f64>,
}

impl Point {
    /// The figures of a `/metrics` document taken at `t` (Unix milliseconds).
    pub fn from_metrics(text: &str, t: u64) -> Result<Self, String> {
        let scrape = Scrape::parse(text)?;
        let mut point = Self {
            t,
            ..Self::default()
        };
        for sample in &scrape.samples {
            let label = |name: &str| {
                (sample.labels.iter())
                    .find(|(key, _)| key == name)
                    .map(|(_, value)| value.clone())
            };
            match sample.name.as_str() {
                "ringmq_listener_connections_open" => {
                    let listener = label("listener").unwrap_or_default();
                    point.connections.insert(listener, sample.value);
                }
                "ringmq_message_drops_total" => {
                    let reason = label("reason").unwrap_or_default();
                    point.drops.insert(reason, sample.value);
                }
                "ringmq_sessions" => point.sessions = sample.value,
                "ringmq_messages_received_total" => point.received = sample.value,
                "ringmq_messages_sent_total" => point.sent = sample.value,
                _ => {}
            }
        }
        Ok(point)
    }
}

/// The ring and its sampler's stop signal.
pub struct History {
    points: Mutex<VecDeque<Point>>,
    capacity: usize,
    interval: Duration,
    stopped: Mutex<bool>,
    wake: Condvar,
}

/// What `GET /api/v1/history` answers.
#[derive(Serialize)]
struct View<'a> {
    interval_ms: u64,
    capacity: usize,
    points: &'a VecDeque<Point>,
}

impl History {
    /// An empty ring of `capacity` points taken every `interval`.
    pub fn new(capacity: usize, interval: Duration) -> Self {
        Self {
            points: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity: capacity.max(1),
            interval,
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        }
    }

    fn points(&self) -> MutexGuard<'_, VecDeque<Point>> {
        self.points.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds `point`, dropping the oldest when full.
    pub fn push(&self, point: Point) {
        let mut points = self.points();
        if points.len() == self.capacity {
            points.pop_front();
        }
        points.push_back(point);
    }

    /// How many points are kept now.
    pub fn len(&self) -> usize {
        self.points().len()
    }

    /// Whether no point was taken yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ring as JSON, oldest point first.
    pub fn json(&self) -> String {
        let points = self.points();
        let view = View {
            interval_ms: self.interval.as_millis() as u64,
            capacity: self.capacity,
            points: &points,
        };
        serde_json::to_string(&view).unwrap_or_else(|_| "{}".into())
    }

    /// Takes one point from `port`'s metrics now.
    fn sample(&self, port: &dyn OpsPort) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        match Point::from_metrics(&port.metrics(), t) {
            Ok(point) => self.push(point),
            Err(error) => tracing::warn!(%error, "dashboard history: unreadable metrics"),
        }
    }

    /// Samples `port` every interval, the first at once, until [`Self::stop`].
    pub fn spawn_sampler(
        self: &Arc<Self>,
        port: Arc<dyn OpsPort>,
    ) -> std::io::Result<JoinHandle<()>> {
        let history = Arc::clone(self);
        std::thread::Builder::new()
            .name("ringmq-http-history".into())
            .spawn(move || {
                loop {
                    history.sample(&*port);
                    let stopped = history.stopped();
                    let (stopped, _) = (history.wake)
                        .wait_timeout_while(stopped, history.interval, |stop| !*stop)
                        .unwrap_or_else(PoisonError::into_inner);
                    if *stopped {
                        break;
                    }
                }
            })
    }

    fn stopped(&self) -> MutexGuard<'_, bool> {
        self.stopped.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the sampler thread at its next wait.
    pub fn stop(&self) {
        *self.stopped() = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
# HELP ringmq_listener_connections_open Sockets.
# TYPE ringmq_listener_connections_open gauge
ringmq_listener_connections_open{listener=\"tcp\"} 3
ringmq_listener_connections_open{listener=\"ws\"} 1
# HELP ringmq_sessions Sessions.
# TYPE ringmq_sessions gauge
ringmq_sessions 5
# HELP ringmq_messages_received_total In.
# TYPE ringmq_messages_received_total counter
ringmq_messages_received_total 40
# HELP ringmq_message_drops_total Drops.
# TYPE ringmq_message_drops_total counter
ringmq_message_drops_total{reason=\"queue_full\"} 2
";

    #[test]
    fn a_point_reads_the_charted_families() {
        let point = Point::from_metrics(DOC, 7).expect("parses");
        assert_eq!(point.t, 7);
        assert_eq!(point.connections["tcp"], 3.0);
        assert_eq!(point.connections["ws"], 1.0);
        assert_eq!(point.sessions, 5.0);
        assert_eq!(point.received, 40.0);
        assert_eq!(point.sent, 0.0, "absent family");
        assert_eq!(point.drops["queue_full"], 2.0);
    }

    #[test]
    fn the_ring_keeps_the_last_capacity_points() {
        let history = History::new(CAPACITY, Duration::from_secs(5));
        for t in 0..(CAPACITY as u64 * 2 + 3) {
            history.push(Point {
                t,
                ..Point::default()
            });
        }
        assert_eq!(history.len(), CAPACITY);
        let json: serde_json::Value = serde_json::from_str(&history.json()).expect("JSON");
        let points = json["points"].as_array().expect("points");
        assert_eq!(points.len(), CAPACITY);
        assert_eq!(points[0]["t"], CAPACITY as u64 + 3, "oldest dropped first");
        assert_eq!(json["interval_ms"], 5000);
    }
}
