//! [`QuietWatch`]: whether a shard has gone quiet since it last worked, read from its busy
//! time, so that `memory.rs` collects free memory once a burst is over and not during a
//! steady light load.

use std::time::{Duration, Instant};

/// How often a shard that worked looks whether it has gone quiet: the first collection comes
/// half a second to a second after a burst ends (a second to two with 1 s, which a connection
/// storm measured two seconds after its last connection straddled: issue 17's idle-connection
/// RSS).
pub(super) const QUIET_CHECK: Duration = Duration::from_millis(500);
/// A shard busy for less than this over a [`QUIET_CHECK`] interval (1 %) is quiet (keep-alives
/// of thousands of idle clients take a few milliseconds a second).
const QUIET_BUSY_NS: u64 = 5_000_000;
/// A shard busy for at least this in a [`QUIET_CHECK`] window (5 %) had a burst: its quiet
/// collections start over at once ([`QuietWatch`]).
const BURST_BUSY_NS: u64 = 5 * QUIET_BUSY_NS;
/// The least time between two quiet collections with no burst between them; it doubles with
/// each such collection, up to [`MAX_COLLECT_GAP`].
const FIRST_COLLECT_GAP: Duration = Duration::from_secs(1);
/// The longest such gap: a shard under a steady light load collects about once a minute.
const MAX_COLLECT_GAP: Duration = Duration::from_secs(64);

/// Whether a shard has gone quiet since it last worked, read from its busy time.
///
/// A shard that worked (busy [`QUIET_BUSY_NS`] since the last check) arms a check; one quiet
/// for a whole check interval collects. Between collections with no burst between them
/// ([`BURST_BUSY_NS`] in one [`QUIET_CHECK`] window) the gap doubles, from
/// [`FIRST_COLLECT_GAP`] to [`MAX_COLLECT_GAP`]. So after a connection storm a shard collects
/// once it is quiet, and may again a second later and two after that; a steady load that keeps
/// it near the quiet line (issue 17's light load, about 1 %) no longer makes it collect every second or
/// two, each time handing back receive buffers that the next receives fault in again.
#[derive(Debug, Default)]
pub(super) struct QuietWatch {
    /// A check is armed.
    armed: bool,
    /// The shard's busy time at the last check (nanoseconds).
    busy_at_check: u64,
    /// It collected at the last quiet check and has not worked since.
    collected: bool,
    /// When it last collected, and the least time until the next collection.
    last_collect: Option<(Instant, Duration)>,
    /// The window being watched for a burst: when it began, and the busy time then.
    window: Option<(Instant, u64)>,
}

impl QuietWatch {
    /// At a turn's end at `now`, with the shard's busy time `busy_ns`: whether to arm a check
    /// (none is armed, and the shard has not collected, or worked since it did and the gap
    /// since that collection is over).
    pub(super) fn wants_check(&mut self, now: Instant, busy_ns: u64) -> bool {
        if self.burst_in_window(now, busy_ns) {
            self.last_collect = None;
        }
        if self.armed {
            return false;
        }
        let worked = busy_ns.saturating_sub(self.busy_at_check) >= QUIET_BUSY_NS;
        let gap_over = self
            .last_collect
            .is_none_or(|(at, gap)| now.saturating_duration_since(at) >= gap);
        !self.collected || (worked && gap_over)
    }

    /// Whether the window being watched held a burst; starts a new window once it is over.
    /// A window is closed at the first turn end past its length; a longer one (the shard
    /// slept through its end) needs proportionally more.
    fn burst_in_window(&mut self, now: Instant, busy_ns: u64) -> bool {
        let (start, busy_then) = *self.window.get_or_insert((now, busy_ns));
        let elapsed = now.saturating_duration_since(start);
        let busy = busy_ns.saturating_sub(busy_then);
        let window = QUIET_CHECK.as_nanos();
        let needed = u128::from(BURST_BUSY_NS) * elapsed.as_nanos().max(window) / window;
        if u128::from(busy) >= needed {
            self.window = None;
            return true;
        }
        if elapsed >= QUIET_CHECK {
            self.window = Some((now, busy_ns));
        }
        false
    }

    pub(super) fn armed(&mut self) {
        self.armed = true;
    }

    /// A check is due at `now`, the shard's busy time now `busy_ns`: whether to collect (the
    /// shard was quiet since the last check, and has not collected since it worked).
    pub(super) fn check(&mut self, now: Instant, busy_ns: u64) -> bool {
        self.armed = false;
        let busy = busy_ns.saturating_sub(self.busy_at_check);
        self.busy_at_check = busy_ns;
        if busy >= QUIET_BUSY_NS {
            self.collected = false;
            return false;
        }
        if std::mem::replace(&mut self.collected, true) {
            return false;
        }
        let gap = self
            .last_collect
            .map_or(FIRST_COLLECT_GAP, |(_, gap)| (gap * 2).min(MAX_COLLECT_GAP));
        self.last_collect = Some((now, gap));
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{BURST_BUSY_NS, QUIET_BUSY_NS, QUIET_CHECK, QuietWatch};

    /// A shard's clock and busy time, its watch, and when its armed check is due.
    struct Shard {
        watch: QuietWatch,
        now: Instant,
        busy: u64,
        due: Option<Instant>,
    }

    impl Shard {
        fn new() -> Self {
            Self {
                watch: QuietWatch::default(),
                now: Instant::now(),
                busy: 0,
                due: None,
            }
        }

        /// A turn end `after` the last one, the shard busy `busy` more nanoseconds in between:
        /// whether it arms a check.
        fn turn(&mut self, after: Duration, busy: u64) -> bool {
            self.now += after;
            self.busy += busy;
            self.watch.wants_check(self.now, self.busy)
        }

        /// A check `QUIET_CHECK` after the last turn, the shard busy `busy` more in between:
        /// whether it collected.
        fn check_after(&mut self, busy: u64) -> bool {
            assert!(
                self.turn(Duration::ZERO, 0) || self.watch.armed,
                "a check is armed"
            );
            self.watch.armed();
            self.now += QUIET_CHECK;
            self.busy += busy;
            self.watch.check(self.now, self.busy)
        }

        /// `secs` seconds of turns 2 ms apart, each busy `busy` nanoseconds, with the checks
        /// armed and run as the shard does: the collections in that time.
        fn run(&mut self, secs: u64, busy: u64) -> usize {
            let mut collections = 0;
            for _ in 0..secs * 500 {
                self.now += Duration::from_millis(2);
                self.busy += busy;
                if self.due.is_some_and(|at| self.now >= at) {
                    self.due = None;
                    collections += usize::from(self.watch.check(self.now, self.busy));
                }
                if self.watch.wants_check(self.now, self.busy) {
                    self.watch.armed();
                    self.due = Some(self.now + QUIET_CHECK);
                }
            }
            collections
        }
    }

    #[test]
    fn a_shard_collects_once_when_it_goes_quiet_and_again_only_after_it_worked() {
        let mut shard = Shard::new();
        assert!(
            !shard.check_after(50 * QUIET_BUSY_NS),
            "busy: no collection"
        );
        assert!(!shard.check_after(QUIET_BUSY_NS), "still busy");
        assert!(shard.check_after(0), "quiet: collects");
        assert!(
            !shard.turn(Duration::from_secs(60), 0),
            "no check while nothing happens"
        );
        assert!(
            !shard.turn(Duration::from_millis(10), QUIET_BUSY_NS / 2),
            "a few keep-alives do not arm a check"
        );
        assert!(
            shard.turn(Duration::from_millis(10), QUIET_BUSY_NS),
            "work arms a check again"
        );
        assert!(
            !shard.check_after(QUIET_BUSY_NS),
            "it worked in that interval"
        );
        assert!(shard.check_after(1), "quiet again: collects once more");
    }

    /// Issue 17's light load keeps a shard near the quiet line: its busy time adds up to the
    /// work line every second or so. The collections back off instead of following it.
    #[test]
    fn a_steady_light_load_backs_the_collections_off() {
        let mut shard = Shard::new();
        let light = QUIET_BUSY_NS * 8 / 10 / 250; // 0.8 % of each 2 ms turn
        let collections = shard.run(120, light);
        assert!(
            (5..=8).contains(&collections),
            "{collections} collections in 2 minutes: one after 1, 2, 4, ... 64 s"
        );
        assert_eq!(shard.run(60, light), 1, "64 s apart at most");
    }

    /// After a connection storm a shard collects when it goes quiet, and a burst later starts
    /// the gaps over.
    #[test]
    fn a_burst_starts_the_gaps_over() {
        let mut shard = Shard::new();
        let light = QUIET_BUSY_NS * 8 / 10 / 250;
        let burst = BURST_BUSY_NS / 100; // 10 % of each 2 ms turn
        shard.run(120, light);
        assert_eq!(shard.run(3, burst), 0, "busy: no collection");
        assert_eq!(shard.run(2, 0), 1, "quiet after the burst: collects");
        assert!(shard.run(3, light) >= 1, "a second later, not a minute");
    }

    /// A window the shard slept through is judged by its whole length.
    #[test]
    fn a_long_window_needs_proportionally_more_work() {
        let mut watch = QuietWatch::default();
        let start = Instant::now();
        assert!(!watch.burst_in_window(start, 0), "the window starts");
        let later = start + QUIET_CHECK * 10;
        assert!(
            !watch.burst_in_window(later, 2 * BURST_BUSY_NS),
            "1 % over ten windows is no burst"
        );
        assert!(
            watch.burst_in_window(later + QUIET_CHECK / 2, 3 * BURST_BUSY_NS),
            "the next window holds one"
        );
    }

    #[test]
    fn an_armed_check_is_not_armed_twice() {
        let mut shard = Shard::new();
        assert!(shard.turn(Duration::ZERO, 0));
        shard.watch.armed();
        assert!(!shard.turn(Duration::ZERO, 10 * QUIET_BUSY_NS));
    }
}
