//! Where the shards read the time ([`crate::RuntimeConfig::clock`]): the system's monotonic
//! clock, or a [`ManualClock`] that only moves when a test advances it.
//!
//! A shard reads its clock once per turn (after the wait) and once more to size the wait, so
//! the choice costs one `match` per turn, never a call per packet. Advancing a manual clock
//! wakes every shard of every runtime started on it (the mailbox wake-up): a shard blocked in
//! the kernel re-reads the time and fires the timers now due.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// The time source of a runtime.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// `Instant::now()`.
    #[default]
    System,
    /// A test clock that stands still until [`ManualClock::advance`].
    Manual(ManualClock),
}

impl Clock {
    /// The time now.
    #[inline]
    pub fn now(&self) -> Instant {
        match self {
            Self::System => Instant::now(),
            Self::Manual(manual) => manual.now(),
        }
    }

    /// Lets an advance of a manual clock wake `shards` (a no-op for the system clock).
    pub(crate) fn register(&self, shards: Weak<dyn WakeShards>) {
        if let Self::Manual(manual) = self {
            manual.register(shards);
        }
    }
}

/// Something that wakes a runtime's shards (its mailbox wake-ups).
pub(crate) trait WakeShards: Send + Sync {
    /// Wakes every shard so it re-reads the time.
    fn wake_all(&self);
}

/// A clock for tests: starts at the `Instant` it was created and moves only when advanced.
/// Clones share the time.
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    origin: Instant,
    /// Nanoseconds advanced since `origin`.
    offset: AtomicU64,
    /// The runtimes started on this clock (weak: a stopped runtime is simply skipped).
    shards: Mutex<Vec<Weak<dyn WakeShards>>>,
}

impl ManualClock {
    /// A clock standing at the current system time.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(ManualInner {
                origin: Instant::now(),
                offset: AtomicU64::new(0),
                shards: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The time now.
    pub fn now(&self) -> Instant {
        let offset = self.inner.offset.load(Ordering::SeqCst);
        self.inner.origin + Duration::from_nanos(offset)
    }

    /// Moves the time forward by `by` and wakes every shard running on this clock, so timers
    /// due by the new time fire without waiting for I/O.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.inner.offset.fetch_add(nanos, Ordering::SeqCst);
        let shards = self.live_shards();
        for runtime in shards {
            runtime.wake_all();
        }
    }

    /// The runtimes still running, pruning the stopped ones.
    fn live_shards(&self) -> Vec<Arc<dyn WakeShards>> {
        let mut shards = self.lock();
        shards.retain(|weak| weak.strong_count() > 0);
        shards.iter().filter_map(Weak::upgrade).collect()
    }

    fn register(&self, shards: Weak<dyn WakeShards>) {
        self.lock().push(shards);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Weak<dyn WakeShards>>> {
        // The list stays consistent whatever panicked while holding it.
        self.inner
            .shards
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field(
                "advanced",
                &Duration::from_nanos(self.inner.offset.load(Ordering::SeqCst)),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counting(AtomicUsize);

    impl WakeShards for Counting {
        fn wake_all(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn manual_time_moves_only_when_advanced_and_wakes_live_runtimes() {
        let manual = ManualClock::new();
        let clock = Clock::Manual(manual.clone());
        let start = clock.now();
        assert_eq!(clock.now(), start);
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let runtime: Arc<dyn WakeShards> = counting.clone();
        clock.register(Arc::downgrade(&runtime));
        manual.advance(Duration::from_secs(3));
        assert_eq!(clock.now(), start + Duration::from_secs(3));
        assert_eq!(
            counting.0.load(Ordering::SeqCst),
            1,
            "the advance woke the runtime"
        );
        drop((runtime, counting));
        manual.advance(Duration::from_millis(1));
        assert_eq!(manual.lock().len(), 0, "a stopped runtime is pruned");
    }
}
