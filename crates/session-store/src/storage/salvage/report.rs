//! What check and salvage report: the engine, the counts, the findings.

use std::fmt;
use std::path::PathBuf;

use crate::storage::Recovered;

/// The engines a store directory can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreEngine {
    /// `log-0`, `log-1` and `checkpoint.redb`.
    Log,
    /// `sessions.redb`.
    Redb,
    /// sled's `conf` and `db`.
    Sled,
}

/// What a store holds, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    pub sessions: usize,
    pub queued: usize,
    pub inflight: usize,
    pub awaiting_release: usize,
    pub retained: usize,
    pub delayed: usize,
}

impl StoreCounts {
    pub(crate) fn of(recovered: &Recovered) -> Self {
        let sessions = &recovered.sessions;
        Self {
            sessions: sessions.len(),
            queued: sessions.iter().map(|s| s.queued.len()).sum(),
            inflight: sessions.iter().map(|s| s.inflight.len()).sum(),
            awaiting_release: sessions.iter().map(|s| s.awaiting_release.len()).sum(),
            retained: recovered.retained.len(),
            delayed: recovered.delayed.len(),
        }
    }
}

impl fmt::Display for StoreCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} session(s), {} queued message(s), {} inflight, {} inbound QoS 2 id(s), {} \
             retained, {} delayed",
            self.sessions,
            self.queued,
            self.inflight,
            self.awaiting_release,
            self.retained,
            self.delayed
        )
    }
}

/// What `check` or `salvage` found.
#[derive(Debug)]
pub struct StoreReport {
    pub engine: StoreEngine,
    pub dir: PathBuf,
    /// What opening the store (a copy of it for `check`; the new store for `salvage`) as the
    /// broker does gives: what it loads, or why it refuses.
    pub opens: Result<StoreCounts, String>,
    /// One line per thing found: files, epochs, damage.
    pub findings: Vec<String>,
    /// Whether damage was found.
    pub damaged: bool,
    /// What everything intact adds up to (what `salvage` keeps).
    pub intact: StoreCounts,
    /// Keys dropped as undecodable or belonging to no stored session.
    pub dropped_keys: usize,
}

impl fmt::Display for StoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "store {} ({:?} engine)", self.dir.display(), self.engine)?;
        for finding in &self.findings {
            writeln!(f, "  {finding}")?;
        }
        match &self.opens {
            Ok(counts) => writeln!(f, "opens: yes, with {counts}")?,
            Err(e) => writeln!(f, "opens: no: {e}")?,
        }
        writeln!(f, "intact: {}", self.intact)?;
        writeln!(
            f,
            "dropped: {} key(s) that do not decode or name no stored session",
            self.dropped_keys
        )?;
        write!(f, "damage: {}", if self.damaged { "found" } else { "none" })
    }
}
