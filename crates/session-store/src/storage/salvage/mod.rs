//! `ringmq store check` and `ringmq store salvage`: what a store directory holds, what is
//! damaged, what a start would do with it, and a fresh store made of everything intact.
//!
//! Both read only: the engines' own opening may write (redb repairs, the log engine
//! checkpoints its replay), so they open a copy in a scratch directory. A log store is read
//! record by record around any damage (`logged/scan.rs`); a redb or sled store through its
//! engine, tag by tag, keeping what reads before an error. Then every key goes through the
//! same loader the broker uses, after dropping what it could not load (values that do not
//! decode, entries of a session whose record is gone: `image.rs`). `salvage` writes the
//! result as a new store of the same engine in a directory that must be new or empty, and
//! opens it as the broker would, to prove it.

mod engines;
mod image;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};

pub(crate) use engines::copy_dir;
pub(crate) use image::{ImageRead, KeyImage};

use super::{Recovered, StorageError};
use engines::Scratch;

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
}

impl StoreCounts {
    fn of(recovered: &Recovered) -> Self {
        let sessions = &recovered.sessions;
        Self {
            sessions: sessions.len(),
            queued: sessions.iter().map(|s| s.queued.len()).sum(),
            inflight: sessions.iter().map(|s| s.inflight.len()).sum(),
            awaiting_release: sessions.iter().map(|s| s.awaiting_release.len()).sum(),
            retained: recovered.retained.len(),
        }
    }
}

impl fmt::Display for StoreCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} session(s), {} queued message(s), {} inflight, {} inbound QoS 2 id(s), {} \
             retained",
            self.sessions, self.queued, self.inflight, self.awaiting_release, self.retained
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

/// The command that reports on the store holding `path` (a file of it, or its directory).
pub(crate) fn check_command(path: &Path) -> String {
    format!("ringmq store check --dir {}", store_dir(path).display())
}

/// The command that salvages the store holding `path`.
pub(crate) fn salvage_command(path: &Path) -> String {
    format!(
        "ringmq store salvage --dir {} --into NEW_DIR",
        store_dir(path).display()
    )
}

fn store_dir(path: &Path) -> &Path {
    if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    }
}

/// The engine of the store in `dir`.
pub fn detect_engine(dir: &Path) -> Result<StoreEngine, StorageError> {
    let has = |name: &str| dir.join(name).exists();
    if has("log-0") || has("log-1") || has("checkpoint.redb") {
        Ok(StoreEngine::Log)
    } else if has("sessions.redb") {
        Ok(StoreEngine::Redb)
    } else if has("conf") || has("db") {
        Ok(StoreEngine::Sled)
    } else {
        Err(StorageError::Corrupt {
            reason: format!(
                "{} holds no store: none of log-0, log-1, checkpoint.redb (log engine), \
                 sessions.redb (redb) or conf and db (sled)",
                dir.display()
            ),
        })
    }
}

/// Reports on the store in `dir` without changing it.
pub fn check_store(dir: &Path) -> Result<StoreReport, StorageError> {
    let engine = detect_engine(dir)?;
    let opens = {
        let scratch = Scratch::new()?;
        engines::copy_dir(dir, scratch.path())?;
        let opens = engines::open_and_count(engine, scratch.path());
        // The error names the copy: name the store.
        let copy = scratch.path().display().to_string();
        opens.map_err(|e| e.replace(&copy, &dir.display().to_string()))
    };
    let (report, _) = read_intact(engine, dir, opens)?;
    Ok(report)
}

/// Writes everything intact of the store in `dir` into a new store of the same engine in
/// `into` (new or empty; never inside `dir`), and opens it as the broker would.
pub fn salvage_store(dir: &Path, into: &Path) -> Result<StoreReport, StorageError> {
    let engine = detect_engine(dir)?;
    engines::refuse_unfit_target(dir, into)?;
    let (mut report, (image, last_epoch)) = read_intact(engine, dir, Err(String::new()))?;
    engines::write_image(engine, into, &image, last_epoch)?;
    report.opens = engines::open_and_count(engine, into);
    report.dir = into.to_owned();
    Ok(report)
}

/// Reads what is intact in `dir` (through a scratch copy where the engine writes on opening).
fn read_intact(
    engine: StoreEngine,
    dir: &Path,
    opens: Result<StoreCounts, String>,
) -> Result<(StoreReport, (KeyImage, u64)), StorageError> {
    let scratch = Scratch::new()?;
    let mut read = engines::read_image(engine, dir, scratch.path())?;
    let dropped_keys = read.image.clean();
    let recovered = engines::load_image(&read.image)?;
    if dropped_keys > 0 {
        read.damaged = true;
    }
    let report = StoreReport {
        engine,
        dir: dir.to_owned(),
        opens,
        findings: read.findings,
        damaged: read.damaged,
        intact: StoreCounts::of(&recovered),
        dropped_keys,
    };
    Ok((report, (read.image, read.last_epoch)))
}
