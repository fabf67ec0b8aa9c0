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
pub(crate) mod files;
pub(crate) mod image;
mod report;
#[cfg(test)]
mod tests;

use std::path::Path;

pub use report::{StoreCounts, StoreEngine, StoreReport};

use super::StorageError;
use files::{Scratch, copy_dir};
use image::KeyImage;

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
        copy_dir(dir, scratch.path())?;
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
