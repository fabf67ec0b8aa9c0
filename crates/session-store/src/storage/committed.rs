//! What the trait's `commit` reports, and how a durable engine syncs.

use super::SessionWrite;

/// How a durable engine syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncMode {
    /// Every `commit` is durable when it returns (a flush or an fsync per commit).
    EveryCommit,
    /// `commit` applies without syncing; committed batches are durable after the next
    /// [`sync`](super::SessionStorage::sync). A crash loses whole batches since the last sync,
    /// newest first, never part of one.
    Deferred,
}

/// What a commit did besides applying the batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Committed {
    /// The writes of the batch that were skipped, in batch order.
    pub skipped: Vec<Skipped>,
}

/// A write that did not follow the stored state and was skipped (a broker bug or a benign race;
/// logged and counted by the broker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The write's kind ([`SessionWrite::kind`]).
    pub write: &'static str,
    /// Its client identifier (lossily decoded; retained-message writes are never skipped).
    pub client_id: String,
}

impl Skipped {
    /// The report for `write`, skipped.
    pub(super) fn of(write: &SessionWrite) -> Self {
        let client_id = write
            .client_id()
            .map(|id| String::from_utf8_lossy(id.as_bytes()).into_owned())
            .unwrap_or_default();
        Self {
            write: write.kind(),
            client_id,
        }
    }
}
