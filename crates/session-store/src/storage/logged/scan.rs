//! Reading a log store for `ringmq store check` and `salvage`: the checkpoint, and every
//! intact record of the epoch each log file holds, around any damage (a bad record is stepped over to the next intact record of
//! the same epoch, found as `damage.rs` finds one), reading only.

use std::path::Path;

use super::damage;
use super::file::LogFile;
use super::record;
use crate::storage::StorageError;
use crate::storage::disk::RealDisk;
use crate::storage::keyed::KeyWrite;
use crate::storage::redb_storage::{Reads, TABLE, engine_error, open_database};
use crate::storage::salvage::image::{ImageRead, KeyImage};

/// What one log file holds after the last checkpointed epoch.
#[derive(Debug, Default)]
pub(crate) struct FileScan {
    /// The epoch it holds (0: none after the checkpoint).
    pub(crate) epoch: u64,
    /// Its intact records' writes, in order.
    pub(crate) writes: Vec<KeyWrite>,
    /// How many intact records.
    pub(crate) records: u64,
    /// What was found wrong, one line each.
    pub(crate) findings: Vec<String>,
    /// Whether damage (not a torn tail) was found.
    pub(crate) damaged: bool,
}

/// Scans the log at `path` for the epoch after `checkpointed` it holds.
pub(crate) fn scan_file(path: &Path, checkpointed: u64) -> Result<FileScan, StorageError> {
    let (file, header) = LogFile::read_only(path)?;
    let mut scan = FileScan::default();
    if header != format!("format {}", super::file::FORMAT_VERSION) {
        scan.findings.push(format!("{}: {header}", path.display()));
    }
    let first = intact_at(&file, file.start)?;
    let epoch = match first {
        Some((epoch, _)) => epoch,
        None => damage::first_intact(&file, file.start + 1, &|e| e > checkpointed)?
            .map_or(0, |(_, epoch)| epoch),
    };
    if epoch <= checkpointed {
        return Ok(scan);
    }
    scan.epoch = epoch;
    let mut at = file.start;
    loop {
        if let Some((_, bytes)) = intact_at(&file, at)?.filter(|(e, _)| *e == epoch) {
            match record::read(&bytes).map(|r| record::decode(r.body)) {
                Some(Ok(writes)) => {
                    scan.writes.extend(writes);
                    scan.records += 1;
                }
                _ => scan.note_damage(
                    path,
                    at,
                    "a record whose checksum holds but which does not decode",
                ),
            }
            at += bytes.len() as u64;
            continue;
        }
        if at > file.start && damage::is_clean_end(&file, at, epoch)? {
            break;
        }
        match damage::first_intact(&file, at + 1, &|e| e == epoch)? {
            Some((next, _)) => {
                let what = format!(
                    "{} bytes that are no intact record, stepped over",
                    next - at
                );
                scan.note_damage(path, at, &what);
                at = next;
            }
            None => {
                if damage::header_epoch(&file, at)? == Some(epoch) {
                    scan.findings.push(format!(
                        "{}: a torn last record at byte {at} (cut by a crash before its sync \
                         returned: never acknowledged)",
                        path.display()
                    ));
                }
                break;
            }
        }
    }
    Ok(scan)
}

/// The epoch and bytes of the intact record at `at`, if there is one.
fn intact_at(file: &LogFile, at: u64) -> Result<Option<(u64, Vec<u8>)>, StorageError> {
    let bytes = file.read_record(at)?;
    Ok(bytes.and_then(|bytes| record::read(&bytes).map(|r| r.epoch).map(|e| (e, bytes))))
}

impl FileScan {
    fn note_damage(&mut self, path: &Path, at: u64, what: &str) {
        self.damaged = true;
        self.findings
            .push(format!("{}: damage at byte {at}: {what}", path.display()));
    }
}

/// Reads the log store in `dir`: the checkpoint (from a copy in `scratch`: opening redb may
/// write) and every intact record of each log's epoch after it, in epoch order.
pub(crate) fn scan_store(dir: &Path, scratch: &Path) -> Result<ImageRead, StorageError> {
    let mut scan = ImageRead::default();
    let (image, checkpointed) = read_checkpoint(dir, scratch, &mut scan);
    scan.image = image;
    scan.last_epoch = checkpointed;
    let mut files = Vec::new();
    for name in super::LOG_FILES {
        let path = dir.join(name);
        if !path.exists() {
            scan.findings.push(format!("{} is missing", path.display()));
            continue;
        }
        let file = scan_file(&path, checkpointed)?;
        scan.damaged |= file.damaged;
        scan.findings.extend(file.findings.iter().cloned());
        if file.epoch > 0 {
            files.push(file);
        }
    }
    files.sort_by_key(|file| file.epoch);
    if let Some(first) = files.first().filter(|f| f.epoch > checkpointed + 1) {
        scan.damaged = true;
        scan.findings.push(
            super::behind_the_logs(&dir.join(super::DB_FILE), checkpointed, first.epoch)
                .to_string(),
        );
    }
    for file in files {
        scan.findings.push(format!(
            "epoch {}: {} intact record(s), {} write(s)",
            file.epoch,
            file.records,
            file.writes.len()
        ));
        scan.last_epoch = scan.last_epoch.max(file.epoch);
        for write in file.writes {
            scan.image.apply(write);
        }
    }
    Ok(scan)
}

/// The checkpoint's keys and epoch, read from a copy in `scratch`; an unreadable one is
/// reported and taken as empty.
fn read_checkpoint(dir: &Path, scratch: &Path, scan: &mut ImageRead) -> (KeyImage, u64) {
    let path = dir.join(super::DB_FILE);
    if !path.exists() {
        scan.damaged = true;
        scan.findings.push(format!("{} is missing", path.display()));
        return (KeyImage::default(), 0);
    }
    match checkpoint_copy(&path, scratch) {
        Ok((image, epoch, errors)) => {
            scan.damaged |= !errors.is_empty();
            let lines = errors
                .into_iter()
                .map(|e| format!("{}: {e}", path.display()));
            scan.findings.extend(lines);
            scan.findings.push(format!(
                "{}: checkpointed up to epoch {epoch}, {} key(s)",
                path.display(),
                image.0.len()
            ));
            (image, epoch)
        }
        Err(e) => {
            scan.damaged = true;
            scan.findings.push(format!(
                "the checkpoint cannot be read ({e}): only the logs' records are kept"
            ));
            (KeyImage::default(), 0)
        }
    }
}

/// Reads the checkpoint at `path` from a copy in `scratch`: its keys, its epoch, and the
/// errors of the scans that stopped early.
fn checkpoint_copy(
    path: &Path,
    scratch: &Path,
) -> Result<(KeyImage, u64, Vec<String>), StorageError> {
    let copy = scratch.join(super::DB_FILE);
    std::fs::copy(path, &copy).map_err(|e| super::error::file_error(path, &e))?;
    let (db, _) = open_database(&RealDisk, scratch, super::DB_FILE, 64 << 20)?;
    let epoch = super::checkpoint::checkpointed(&db, path)?;
    let txn = db.begin_read().map_err(|e| engine_error(path, &e))?;
    let table = match txn.open_table(TABLE) {
        Ok(table) => table,
        Err(::redb::TableError::TableDoesNotExist(_)) => {
            return Ok((KeyImage::default(), epoch, Vec::new()));
        }
        Err(e) => return Err(engine_error(path, &e)),
    };
    let mut errors = Vec::new();
    let image = KeyImage::read_from(&Reads::new(&table, path), &mut errors);
    Ok((image, epoch, errors))
}

/// Writes `image` as the checkpoint of a new log store in `into`, checkpointed up to
/// `epoch` (the logs are created blank when the store is next opened).
pub(crate) fn write_image(into: &Path, image: &KeyImage, epoch: u64) -> Result<(), StorageError> {
    let (db, path) = open_database(&RealDisk, into, super::DB_FILE, 64 << 20)?;
    let mut pending = super::pending::Pending::default();
    for (key, value) in &image.0 {
        pending.apply(KeyWrite {
            key: key.clone(),
            value: Some(value.clone()),
            absent_before: true,
        });
    }
    super::checkpoint::apply(&db, &path, epoch, &pending)
}
