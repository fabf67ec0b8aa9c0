//! How busy a shard is, and how long adaptive write pacing holds a stream at that load
//! (`RuntimeConfig::write_pacing`).
//!
//! The load is the share of the wall time the shard was busy lately, by the larger of two
//! measures: the thread's CPU time (user and system, so the kernel's work in its own writes
//! counts even where io_uring does it inside the wait) and the time its turns took outside a
//! wait that could block (which counts time the thread was runnable but another process had
//! the core: a saturated shard on a shared machine gets less CPU than it wants, not less
//! work). Sampled at most once per [`SAMPLE_EVERY`] and smoothed over about [`HORIZON`]. A
//! shard with idle time writes every connection at the end
//! of every turn; a busy one holds streams so they leave in fewer, larger writes, up to the
//! configured interval. In between the hold grows linearly with the load, so it settles where
//! the load it leaves matches it instead of switching on and off.

use std::time::{Duration, Instant};

/// At or below this share of its core a shard holds nothing.
const IDLE_UP_TO: f32 = 0.05;
/// At or above this share of its core a shard holds streams the whole interval. Low on
/// purpose: the writes pacing saves are most of a fan-out's cost, so a shard that already
/// holds and still uses this much would use several times more without holding.
const BUSY_FROM: f32 = 0.15;
/// Shortest wall time between two readings of the thread's CPU clock (a system call).
pub(super) const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// Time constant of the smoothing: a sample this old weighs about 1/e of a new one.
const HORIZON: Duration = Duration::from_millis(32);

/// The smoothed share of its core a shard used (0 to 1).
#[derive(Debug, Default)]
pub(super) struct Utilization {
    value: f32,
}

impl Utilization {
    /// Takes one sample: `cpu` used during `wall`. A sample weighs in proportion to its wall
    /// time, so the average covers about [`HORIZON`] whatever the sampling rate.
    pub(super) fn record(&mut self, cpu: Duration, wall: Duration) {
        if wall.is_zero() {
            return;
        }
        let sample = (cpu.as_secs_f32() / wall.as_secs_f32()).min(1.0);
        let weight = (wall.as_secs_f32() / HORIZON.as_secs_f32()).min(1.0);
        self.value += (sample - self.value) * weight;
    }

    pub(super) fn value(&self) -> f32 {
        self.value
    }
}

/// How long streams wait at `utilization`: nothing up to [`IDLE_UP_TO`], all of `max` from
/// [`BUSY_FROM`], linear in between; in whole microseconds.
pub(super) fn hold_us(utilization: f32, max_us: u32) -> u32 {
    let pressure = ((utilization - IDLE_UP_TO) / (BUSY_FROM - IDLE_UP_TO)).clamp(0.0, 1.0);
    // Exact at both ends: 0.0 and 1.0 times `max_us`.
    (pressure * max_us as f32) as u32
}

/// What the gauge read at one sample.
#[derive(Clone, Copy)]
struct Reading {
    wall: Instant,
    cpu: Duration,
    busy: Duration,
}

/// Reads the shard thread's CPU clock now and then and keeps its [`Utilization`].
pub(super) struct LoadGauge {
    utilization: Utilization,
    /// The last reading (`None` until one succeeded).
    last: Option<Reading>,
    read_cpu: fn() -> Option<Duration>,
}

impl LoadGauge {
    pub(super) fn new(read_cpu: fn() -> Option<Duration>) -> Self {
        Self {
            utilization: Utilization::default(),
            last: None,
            read_cpu,
        }
    }

    /// At the start of a turn, with the shard's busy time so far: reads the CPU clock if
    /// [`SAMPLE_EVERY`] has passed since the last reading and returns the new utilization, or
    /// `None` when nothing was read.
    pub(super) fn sample(&mut self, now: Instant, busy: Duration) -> Option<f32> {
        if let Some(last) = self.last
            && now.saturating_duration_since(last.wall) < SAMPLE_EVERY
        {
            return None;
        }
        let cpu = (self.read_cpu)()?;
        let reading = Reading {
            wall: now,
            cpu,
            busy,
        };
        if let Some(last) = self.last.replace(reading) {
            let used = cpu
                .saturating_sub(last.cpu)
                .max(busy.saturating_sub(last.busy));
            self.utilization
                .record(used, now.saturating_duration_since(last.wall));
        }
        Some(self.utilization.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A utilization after `samples` samples of `share` of each millisecond.
    fn steady(share: f32, samples: usize) -> Utilization {
        let mut utilization = Utilization::default();
        for _ in 0..samples {
            utilization.record(MS.mul_f32(share), MS);
        }
        utilization
    }

    #[test]
    fn an_idle_shard_holds_nothing_and_a_busy_one_the_whole_interval() {
        assert_eq!(hold_us(0.0, 10_000), 0);
        assert_eq!(hold_us(IDLE_UP_TO, 10_000), 0);
        assert_eq!(hold_us(BUSY_FROM, 10_000), 10_000);
        assert_eq!(hold_us(1.0, 10_000), 10_000);
    }

    #[test]
    fn in_between_the_hold_grows_with_the_load() {
        let halfway = (IDLE_UP_TO + BUSY_FROM) / 2.0;
        let hold = hold_us(halfway, 10_000);
        assert!((4_990..=5_010).contains(&hold), "{hold}");
        let mut last = 0;
        for step in 0..=100 {
            let hold = hold_us(step as f32 / 100.0, 10_000);
            assert!(hold >= last, "the hold shrank at {step} %: {hold} < {last}");
            last = hold;
        }
    }

    #[test]
    fn pacing_off_holds_nothing_at_any_load() {
        assert_eq!(hold_us(1.0, 0), 0);
    }

    #[test]
    fn utilization_follows_a_steady_load() {
        let busy = steady(0.8, 200);
        assert!((busy.value() - 0.8).abs() < 0.01, "{}", busy.value());
        let idle = steady(0.01, 200);
        assert!(idle.value() < 0.02, "{}", idle.value());
    }

    #[test]
    fn one_busy_turn_does_not_make_an_idle_shard_hold() {
        let mut utilization = steady(0.0, 100);
        // A 1 ms sample at 100 %: weighs 1/32 of the average.
        utilization.record(MS, MS);
        assert_eq!(hold_us(utilization.value(), 10_000), 0);
    }

    #[test]
    fn a_load_that_rises_is_followed_within_a_few_horizons() {
        let mut utilization = steady(0.0, 100);
        let mut samples = 0;
        while hold_us(utilization.value(), 10_000) < 10_000 {
            utilization.record(MS.mul_f32(0.5), MS);
            samples += 1;
            assert!(
                samples < 200,
                "still below the full hold after 200 ms at 50 %"
            );
        }
        // 0 -> 0.15 of a step to 0.5: -ln(1 - 0.3) * 32 ms = about 11.4 ms.
        assert!((8..=16).contains(&samples), "{samples} samples");
    }

    #[test]
    fn a_long_sample_counts_by_its_wall_time_and_is_capped_at_the_whole_core() {
        let mut utilization = steady(0.0, 100);
        // One sample of 10 horizons replaces the average; more CPU than wall (rounding
        // between the two clocks) counts as the whole core.
        utilization.record(HORIZON * 20, HORIZON * 10);
        assert_eq!(utilization.value(), 1.0);
        utilization.record(Duration::ZERO, Duration::ZERO);
        assert_eq!(utilization.value(), 1.0, "an empty sample changes nothing");
    }

    fn cpu_at_10_ms() -> Option<Duration> {
        Some(MS * 10)
    }

    fn no_cpu_clock() -> Option<Duration> {
        None
    }

    #[test]
    fn the_gauge_reads_at_most_once_per_sample_interval() {
        let start = Instant::now();
        let mut gauge = LoadGauge::new(cpu_at_10_ms);
        let busy = Duration::ZERO;
        assert_eq!(gauge.sample(start, busy), Some(0.0), "the baseline");
        assert_eq!(gauge.sample(start + SAMPLE_EVERY / 2, busy), None);
        // The CPU clock and the busy time stand still: an idle millisecond.
        assert_eq!(gauge.sample(start + SAMPLE_EVERY, busy), Some(0.0));
    }

    #[test]
    fn busy_turns_count_when_the_thread_got_less_cpu_than_wall_time() {
        // The CPU clock stands still (another process had the core) while the shard's turns
        // took the whole horizon: the shard was busy, not idle.
        let start = Instant::now();
        let mut gauge = LoadGauge::new(cpu_at_10_ms);
        gauge.sample(start, Duration::ZERO);
        let utilization = gauge.sample(start + HORIZON, HORIZON);
        assert_eq!(utilization, Some(1.0));
    }

    #[test]
    fn without_a_cpu_clock_the_gauge_reports_nothing() {
        let mut gauge = LoadGauge::new(no_cpu_clock);
        let start = Instant::now();
        assert_eq!(gauge.sample(start, Duration::ZERO), None);
        assert_eq!(gauge.sample(start + HORIZON, HORIZON), None);
    }
}
