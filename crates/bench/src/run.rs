//! Running a plan: start the load threads, print progress each second, stop at the end, and
//! summarise.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use ring_runtime::{DatagramListen, Runtime, RuntimeConfig, ShardId};

use crate::cli::Common;
use crate::plan::RunPlan;
use crate::shard::{BenchShard, Control, Report, Route};
use crate::stats::{Stats, Totals, latency_histogram};
use crate::summary::Summary;
use transport::Connector;
use transport::quic::QuicConnector;

/// How long the run waits, after publishers finished, for the last messages to arrive.
const DRAIN: Duration = Duration::from_secs(3);
/// How often progress is printed and the end of the run checked.
const TICK: Duration = Duration::from_millis(100);
/// How often, within a tick and until every client is ready, readiness is checked: `ready_after`
/// (and the connect rate made of it) is known to this much rather than to a whole tick.
const READY_STEP: Duration = Duration::from_millis(5);

/// Runs `plan` to the end and returns its summary.
pub fn run(plan: RunPlan) -> anyhow::Result<Summary> {
    let plan = Arc::new(plan);
    let threads = match plan.common.threads {
        0 => ring_runtime::available_cores(),
        n => n,
    };
    let stats = Arc::new(Stats::new(threads));
    let (reports_tx, reports) = mpsc::channel::<Report>();
    let mut config = RuntimeConfig {
        shards: Some(threads),
        pin_threads: plan.common.pin,
        sched_slice: (plan.common.sched_slice_us != 0)
            .then(|| Duration::from_micros(plan.common.sched_slice_us)),
        ..RuntimeConfig::default()
    };
    let route = route(&plan.common, &mut config)?;
    let (plan_for, stats_for) = (Arc::clone(&plan), Arc::clone(&stats));
    let handle = Runtime::start(config, move |id: ShardId| {
        BenchShard::new(
            id,
            threads,
            Arc::clone(&plan_for),
            Arc::clone(&stats_for),
            reports_tx.clone(),
            route.clone(),
        )
    })
    .context("starting the load generator runtime")?;
    let started = Instant::now();
    let cpu_before = crate::summary::own_cpu_seconds();
    for index in 0..threads {
        let _ = handle.post(ShardId::new(index as u16), vec![Control::Start]);
    }
    let mut total = latency_histogram();
    let mut per_subscriber = Vec::new();
    let mut watch = Watch::new(&plan, &stats);
    while !watch.finished(started) {
        watch.tick(started);
        let interval = drain_reports(&reports, &mut total, &mut per_subscriber);
        watch.progress(started, interval.as_ref(), plan.common.quiet);
    }
    let elapsed = started.elapsed();
    for index in 0..threads {
        let _ = handle.post(ShardId::new(index as u16), vec![Control::StopPublishing]);
    }
    watch.drain(started);
    handle.shutdown();
    handle.join().context("stopping the load generator")?;
    drain_reports(&reports, &mut total, &mut per_subscriber);
    let cpu = crate::summary::own_cpu_seconds() - cpu_before;
    let timing = crate::summary::Timing {
        elapsed,
        ready_after: watch.ready_after,
        window: watch.window(),
        cpu_s: cpu,
    };
    let mut summary = Summary::new(&plan, stats.totals(), &total, timing);
    summary.subscribers = crate::summary::SubscriberShare::of(&per_subscriber);
    Ok(summary)
}

/// How the clients reach the broker: for `--quic`, a QUIC client endpoint added to `config`
/// (each thread binds its own UDP port on the wildcard address of the hosts' family).
fn route(common: &Common, config: &mut RuntimeConfig) -> anyhow::Result<Route> {
    let settings = common.transport.client_settings();
    if !common.transport.quic {
        return Ok(Route::Tcp(Connector::new(&settings)?));
    }
    let connector = QuicConnector::new(&settings)?;
    let ipv6 = common.host.first().is_some_and(SocketAddr::is_ipv6);
    if common.host.iter().any(|host| host.is_ipv6() != ipv6) {
        anyhow::bail!("--quic: every --host must be IPv4, or every one IPv6");
    }
    let wildcard: IpAddr = if ipv6 {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    config.datagram_clients = vec![DatagramListen {
        addr: SocketAddr::new(wildcard, 0),
        driver: connector.driver_factory(),
    }];
    Ok(Route::Quic {
        endpoint: config.datagram_client_endpoint(0),
    })
}

/// Merges every waiting report into `total` (and final per-subscriber counts into
/// `per_subscriber`); the merge of this batch for progress lines.
fn drain_reports(
    reports: &Receiver<Report>,
    total: &mut Histogram<u64>,
    per_subscriber: &mut Vec<u64>,
) -> Option<Histogram<u64>> {
    let mut interval: Option<Histogram<u64>> = None;
    while let Ok(report) = reports.try_recv() {
        let _ = total.add(&report.histogram);
        per_subscriber.extend_from_slice(&report.subscriber_received);
        match &mut interval {
            Some(h) => {
                let _ = h.add(&report.histogram);
            }
            None => interval = Some(report.histogram),
        }
    }
    interval
}

/// Decides when a run ends and prints progress.
struct Watch<'a> {
    plan: &'a RunPlan,
    stats: &'a Stats,
    publishers: u64,
    last: Totals,
    last_print: Instant,
    publishers_done_at: Option<Instant>,
    interval: Option<Histogram<u64>>,
    /// When every client was ready (or had failed), counted from the start.
    ready_after: Option<Duration>,
    /// When the first message was seen sent, counted from the start.
    first_sent: Option<Duration>,
    /// When the received count last grew, counted from the start.
    last_received: Option<Duration>,
    last_received_count: u64,
}

impl<'a> Watch<'a> {
    fn new(plan: &'a RunPlan, stats: &'a Stats) -> Self {
        Self {
            plan,
            stats,
            publishers: plan.publisher_count() as u64,
            last: Totals::default(),
            last_print: Instant::now(),
            publishers_done_at: None,
            interval: None,
            ready_after: None,
            first_sent: None,
            last_received: None,
            last_received_count: 0,
        }
    }

    /// Notes when sending began and when the last message arrived.
    fn observe(&mut self, t: &Totals, started: Instant) {
        if self.first_sent.is_none() && t.sent > 0 {
            self.first_sent = Some(started.elapsed());
        }
        if t.received > self.last_received_count {
            self.last_received_count = t.received;
            self.last_received = Some(started.elapsed());
        }
    }

    /// From the first message sent to the last one received (to the poll interval).
    fn window(&self) -> Option<Duration> {
        let (from, to) = (self.first_sent?, self.last_received?);
        to.checked_sub(from).filter(|w| !w.is_zero())
    }

    /// Sleeps one [`TICK`]; until every client is ready, in [`READY_STEP`]s, noting the moment.
    fn tick(&mut self, started: Instant) {
        let until = Instant::now() + TICK;
        while self.ready_after.is_none() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::sleep(READY_STEP.min(until - now));
            self.note_ready(&self.stats.totals(), started);
        }
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
    }

    /// Sets `ready_after` the first time every client is ready or has failed.
    fn note_ready(&mut self, t: &Totals, started: Instant) {
        if self.ready_after.is_none()
            && t.ready + t.connect_failures >= self.plan.clients.len() as u64
        {
            self.ready_after = Some(started.elapsed());
            self.stats.set_all_ready();
        }
    }

    /// The duration passed; or the hold time after every client was ready passed; or there are
    /// no publishers and every expected message arrived; or every publisher finished and every
    /// expected message arrived (or the drain time after the publishers finished passed).
    fn finished(&mut self, started: Instant) -> bool {
        if started.elapsed() >= Duration::from_secs(self.plan.common.duration) {
            return true;
        }
        let t = self.stats.totals();
        self.observe(&t, started);
        self.note_ready(&t, started);
        if let (Some(hold), Some(ready)) = (self.plan.common.hold, self.ready_after)
            && started.elapsed() >= ready + Duration::from_secs(hold)
        {
            return true;
        }
        if self.publishers == 0 && self.plan.expect_total > 0 {
            return t.received >= self.plan.expect_total;
        }
        let limited = self.plan.publish.is_some_and(|p| p.limit > 0) && self.publishers > 0;
        if !limited {
            return false;
        }
        if t.publishers_done < self.publishers {
            return false;
        }
        let done_at = *self.publishers_done_at.get_or_insert_with(Instant::now);
        t.received >= self.plan.expected(t.sent) || done_at.elapsed() >= DRAIN
    }

    /// Waits (at most [`DRAIN`]) for the messages still on their way after publishing stopped.
    fn drain(&mut self, started: Instant) {
        let until = Instant::now() + DRAIN;
        let mut last = self.stats.totals();
        let mut quiet_for = 0;
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
            let t = self.stats.totals();
            self.observe(&t, started);
            if t.received >= self.plan.expected(t.sent) {
                return;
            }
            let moved = t.sent != last.sent || t.received != last.received || t.acked != last.acked;
            quiet_for = if moved { 0 } else { quiet_for + 1 };
            // Nothing arrived for half a second: what is missing is lost.
            if quiet_for >= 5 {
                return;
            }
            last = t;
        }
    }

    fn progress(&mut self, started: Instant, interval: Option<&Histogram<u64>>, quiet: bool) {
        if let Some(h) = interval {
            match &mut self.interval {
                Some(acc) => {
                    let _ = acc.add(h);
                }
                None => self.interval = Some(h.clone()),
            }
        }
        let since = self.last_print.elapsed();
        if since < Duration::from_secs(1) {
            return;
        }
        let t = self.stats.totals();
        let secs = since.as_secs_f64();
        let expected = self.plan.expected(t.sent);
        let (p50, p99) = self.interval.take().map_or((0, 0), |h| {
            (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
        });
        if !quiet {
            eprintln!(
                "t={:>4.0}s conns={} ready={} sent/s={:.0} recv/s={:.0} loss={} p50={}us p99={}us",
                started.elapsed().as_secs_f64(),
                t.connected,
                t.ready,
                (t.sent - self.last.sent) as f64 / secs,
                (t.received - self.last.received) as f64 / secs,
                expected.saturating_sub(t.received),
                p50,
                p99,
            );
        }
        self.last = t;
        self.last_print = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::Cli;
    use crate::stats::Counters;

    fn conn_plan(clients: usize) -> RunPlan {
        let count = clients.to_string();
        let cli = Cli::try_parse_from(["ringmq-bench", "conn", "-c", &count, "--quiet"])
            .expect("the arguments parse");
        crate::plan::build(cli.command).expect("the plan builds")
    }

    #[test]
    fn tick_notes_when_every_client_is_ready_or_failed() {
        let plan = conn_plan(3);
        let stats = Stats::new(1);
        let mut watch = Watch::new(&plan, &stats);
        let started = Instant::now();
        Counters::bump(&stats.thread(0).ready, 1);
        Counters::bump(&stats.thread(0).connect_failures, 1);
        watch.tick(started);
        assert_eq!(
            watch.ready_after, None,
            "one client is neither ready nor failed"
        );

        Counters::bump(&stats.thread(0).ready, 1);
        let before = started.elapsed();
        watch.tick(started);
        let after = started.elapsed();
        let ready = watch.ready_after.expect("every client is ready or failed");
        assert!(
            before <= ready && ready <= after,
            "{before:?} <= {ready:?} <= {after:?}"
        );
        assert!(after >= before + TICK, "a tick lasts a tick still");

        watch.tick(started);
        assert_eq!(watch.ready_after, Some(ready), "noted once");
    }
}
