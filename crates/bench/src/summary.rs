//! The end-of-run summary, as text and JSON.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::plan::RunPlan;
use crate::stats::Totals;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// How long a run took and what it cost the load generator.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// From the start to the end of the measured run (before the final drain).
    pub elapsed: Duration,
    /// From the start until every client was ready (connected, and subscribed where it
    /// subscribes) or had failed; `None` if that never happened.
    pub ready_after: Option<Duration>,
    /// From the first message sent to the last one received (to 0.1 s), if any were.
    pub window: Option<Duration>,
    /// CPU seconds the load generator used.
    pub cpu_s: f64,
}

/// How received messages spread over subscribers (shared subscriptions).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SubscriberShare {
    pub subscribers: usize,
    pub min: u64,
    pub max: u64,
}

impl SubscriberShare {
    /// The spread of per-subscriber counts (`None` without subscribers).
    pub fn of(counts: &[u64]) -> Option<Self> {
        Some(Self {
            subscribers: counts.len(),
            min: *counts.iter().min()?,
            max: *counts.iter().max()?,
        })
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub label: String,
    pub clients: usize,
    pub duration_s: f64,
    /// Seconds until every client was ready (connected and subscribed), if they all were.
    pub ready_after_s: Option<f64>,
    /// Accepted connections per second until every client was ready.
    pub connect_rate: Option<f64>,
    pub totals: Totals,
    pub expected: u64,
    pub lost: u64,
    pub sent_per_s: f64,
    pub received_per_s: f64,
    /// Seconds from the first message sent to the last one received.
    pub window_s: Option<f64>,
    /// Messages received per second over that window.
    pub window_received_per_s: Option<f64>,
    /// Messages received per subscriber: fewest and most.
    pub subscribers: Option<SubscriberShare>,
    pub latency_us: Latency,
    /// CPU seconds the load generator itself used.
    pub bench_cpu_s: f64,
    /// Messages the load generator handled (sent + received) per CPU-second of its own.
    pub bench_msgs_per_cpu_s: f64,
}

impl Summary {
    /// Builds the summary of a finished run.
    pub fn new(plan: &RunPlan, totals: Totals, latency: &Histogram<u64>, timing: Timing) -> Self {
        let secs = timing.elapsed.as_secs_f64().max(1e-9);
        let cpu_s = timing.cpu_s;
        let ready_after_s = timing.ready_after.map(|d| d.as_secs_f64());
        let expected = plan.expected(totals.sent);
        let handled = (totals.sent + totals.received) as f64;
        Self {
            label: plan.label.clone(),
            clients: plan.clients.len(),
            duration_s: secs,
            ready_after_s,
            connect_rate: ready_after_s.map(|r| totals.connected as f64 / r.max(1e-3)),
            totals,
            expected,
            lost: expected.saturating_sub(totals.received),
            sent_per_s: totals.sent as f64 / secs,
            received_per_s: totals.received as f64 / secs,
            window_s: timing.window.map(|w| w.as_secs_f64()),
            window_received_per_s: timing
                .window
                .map(|w| totals.received as f64 / w.as_secs_f64()),
            subscribers: None,
            latency_us: Latency {
                count: latency.len(),
                p50: latency.value_at_quantile(0.50),
                p95: latency.value_at_quantile(0.95),
                p99: latency.value_at_quantile(0.99),
                p999: latency.value_at_quantile(0.999),
                max: latency.max(),
            },
            bench_cpu_s: cpu_s,
            bench_msgs_per_cpu_s: if cpu_s > 0.0 { handled / cpu_s } else { 0.0 },
        }
    }

    /// The human-readable form.
    pub fn text(&self) -> String {
        let t = &self.totals;
        let l = &self.latency_us;
        format!(
            "clients {} (connected {}, failed {}, all ready after {}), {:.1} s\n\
             sent {} ({:.0}/s), expected {}, received {} ({:.0}/s), lost {}, duplicates {}, out of order {}\n\
             latency us: p50 {} p95 {} p99 {} p99.9 {} max {} ({} samples)\n\
             load generator: {:.2} CPU s, {:.0} msgs per CPU-second",
            self.clients,
            t.connected,
            t.connect_failures,
            self.ready_after_s
                .map_or_else(|| "-".to_string(), |r| format!("{r:.2} s")),
            self.duration_s,
            t.sent,
            self.sent_per_s,
            self.expected,
            t.received,
            self.received_per_s,
            self.lost,
            t.duplicates,
            t.out_of_order,
            l.p50,
            l.p95,
            l.p99,
            l.p999,
            l.max,
            l.count,
            self.bench_cpu_s,
            self.bench_msgs_per_cpu_s,
        )
    }
}

/// This process's CPU seconds (user + system) from `/proc/self/stat` (USER_HZ is 100 on Linux).
pub fn own_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the line: 11 and 12 after the ')'.
    (ticks(11) + ticks(12)) / 100.0
}
