//! Shutdown in step: a shard that has closed its connections keeps draining its mailbox until
//! every shard has (its own work done, nothing waiting in its outboxes), so a batch another
//! shard posted before going quiet is always handled. Without this, a shard could end while a
//! slower one was still posting to it, and what it posted (a QoS 1/2 copy already
//! acknowledged to its publisher, say) was lost at a clean shutdown.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::ids::ShardId;

/// The longest a quiet shard waits for the others (a shard stuck elsewhere must not hang the
/// shutdown); it then ends as it did before this existed.
pub(crate) const QUIET_WAIT_LIMIT: Duration = Duration::from_secs(5);
/// How often a quiet shard looks again while it waits (besides the wake-ups of the others).
pub(crate) const QUIET_LOOK_EVERY: Duration = Duration::from_millis(50);

/// Which shards are quiet.
#[derive(Debug)]
pub(crate) struct QuietBoard {
    quiet: Vec<AtomicBool>,
}

impl QuietBoard {
    pub(crate) fn new(shards: usize) -> Self {
        Self {
            quiet: (0..shards).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Marks `shard` quiet (or ended); true the first time, when the others should look again.
    pub(crate) fn mark(&self, shard: ShardId) -> bool {
        let Some(flag) = self.quiet.get(shard.index()) else {
            return false;
        };
        !flag.swap(true, Ordering::AcqRel)
    }

    /// Whether every shard is quiet (or ended).
    pub(crate) fn all(&self) -> bool {
        self.quiet.iter().all(|flag| flag.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shard_counts_once() {
        let board = QuietBoard::new(2);
        assert!(board.mark(ShardId::new(0)));
        assert!(!board.mark(ShardId::new(0)));
        assert!(!board.all());
        assert!(board.mark(ShardId::new(1)));
        assert!(board.all());
    }
}
