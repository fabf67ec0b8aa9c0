//! A pinned shard that keeps waiting for its core unpins itself
//! (`RuntimeConfig::unpin_when_shared`).
//!
//! A pinned shard woken by a packet while another thread runs on its core waits for that
//! thread's slice to end, even when another core is idle: the scheduler may not move it. On a
//! machine the broker shares (a gateway's other services, clients, a load generator) those waits
//! are the tail of its latency: on the two-core test machine the probe's slow samples were a
//! shard waiting 1 to 4 ms behind another process's thread while the other core idled
//! (docs/bench/history/issue-53-latency-sched.md). With cores of its own a shard should hardly
//! wait (not measured: no such machine here), and pinned it keeps its caches. So each pinned shard reads how long it waited for its core
//! (the kernel's run delay, `sys::thread::run_delay`) once per [`LOOK_EVERY`]; past
//! [`WAIT_LIMIT`] in one such window it lets itself run on every core the process may use, for
//! the rest of its life.

use std::time::{Duration, Instant};

/// How often the run delay is read.
pub(super) const LOOK_EVERY: Duration = Duration::from_secs(1);
/// Waiting longer than this for its core within one [`LOOK_EVERY`] unpins a shard. On the
/// two-core test machine an idle shard waited 0 µs a second and the probe's shard 1.2 to
/// 4.5 ms unloaded, 2 to 42 ms under load (issue-53-latency-sched.md); dedicated cores were
/// not measured.
pub(super) const WAIT_LIMIT: Duration = Duration::from_millis(2);

/// What reading the run delay gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Not due, or within the limit: stay pinned.
    Stay,
    /// It waited this long within the last window: unpin.
    Unpin(Duration),
    /// The run delay cannot be read here: stop looking.
    Blind,
}

/// One shard's watch over its waits.
pub(super) struct PinWatch {
    /// When the next look is due (`None` before the first, which is at once).
    next_look: Option<Instant>,
    last: Option<Duration>,
    read_delay: fn() -> Option<Duration>,
}

impl PinWatch {
    pub(super) fn new(read_delay: fn() -> Option<Duration>) -> Self {
        Self {
            next_look: None,
            last: None,
            read_delay,
        }
    }

    /// At the start of a turn: reads the run delay when a window has passed.
    pub(super) fn look(&mut self, now: Instant) -> Verdict {
        if self.next_look.is_some_and(|due| now < due) {
            return Verdict::Stay;
        }
        self.next_look = Some(now + LOOK_EVERY);
        let Some(delay) = (self.read_delay)() else {
            return Verdict::Blind;
        };
        let waited = self.last.map(|last| delay.saturating_sub(last));
        self.last = Some(delay);
        match waited {
            Some(waited) if waited > WAIT_LIMIT => Verdict::Unpin(waited),
            _ => Verdict::Stay,
        }
    }
}

/// A pinned shard's way out: its watch and the cores it may use once unpinned.
pub(crate) struct Unpinning {
    watch: PinWatch,
    cores: Vec<usize>,
}

impl Unpinning {
    /// Watches the calling (pinned) thread; `cores`: every core the process may use.
    pub(crate) fn new(cores: Vec<usize>) -> Self {
        Self {
            watch: PinWatch::new(crate::sys::thread::run_delay),
            cores,
        }
    }

    /// Looks when due; `true` once the watch is over (the shard unpinned, or cannot tell).
    pub(super) fn look(&mut self, now: Instant, shard: usize) -> bool {
        match self.watch.look(now) {
            Verdict::Stay => false,
            Verdict::Blind => {
                tracing::debug!(shard, "run delay unreadable: the shard stays pinned");
                true
            }
            Verdict::Unpin(waited) => {
                match crate::sys::thread::set_current_affinity(&self.cores) {
                    Ok(()) => tracing::info!(
                        shard,
                        ?waited,
                        "shard unpinned: it waited for its core while another thread held it \
                         (runtime.unpin_when_shared); the scheduler places it from now on"
                    ),
                    Err(error) => tracing::warn!(
                        shard,
                        %error,
                        "could not unpin a shard that waited for its core (sched_setaffinity)"
                    ),
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    static DELAY_US: AtomicU64 = AtomicU64::new(0);

    fn fake_delay() -> Option<Duration> {
        Some(Duration::from_micros(DELAY_US.load(Ordering::Relaxed)))
    }

    #[test]
    fn a_shard_unpins_once_it_waits_past_the_limit_within_a_window() {
        let start = Instant::now();
        let mut watch = PinWatch::new(fake_delay);
        assert_eq!(
            watch.look(start),
            Verdict::Stay,
            "the first look only reads"
        );
        DELAY_US.store(1_500, Ordering::Relaxed);
        assert_eq!(
            watch.look(start + LOOK_EVERY / 2),
            Verdict::Stay,
            "not due yet"
        );
        assert_eq!(
            watch.look(start + LOOK_EVERY),
            Verdict::Stay,
            "1.5 ms is within"
        );
        DELAY_US.store(1_500 + 2_500, Ordering::Relaxed);
        assert_eq!(
            watch.look(start + 2 * LOOK_EVERY),
            Verdict::Unpin(Duration::from_micros(2_500))
        );
    }

    #[test]
    fn a_thread_whose_delay_cannot_be_read_stops_the_watch() {
        let mut watch = PinWatch::new(|| None);
        assert_eq!(watch.look(Instant::now()), Verdict::Blind);
    }

    #[test]
    fn this_threads_run_delay_reads_where_the_kernel_keeps_it() {
        // Linux with schedstats (every test machine here); elsewhere the watch goes blind.
        if let Some(first) = crate::sys::thread::run_delay() {
            let again = crate::sys::thread::run_delay().expect("readable once, readable again");
            assert!(again >= first, "the run delay never goes back");
        }
    }
}
