//! [`LoggedStorage`]: group commits appended to a log, checkpointed into a redb B-tree in the
//! background.
//!
//! A batch is planned from the in-memory index ([`super::keyed`]) as on the other engines; its
//! key writes become one record appended to the active log file, synced (one `write`, one
//! `fdatasync`), and are kept in memory, netted per key, as the epoch's [`Pending`] writes.
//! When a record does not fit in what is left of the file, the epoch ends: the next epoch
//! starts in the other file with the ended epoch's young entries (new in it, still live, never
//! carried before: mostly QoS 1/2 flows in progress) carried over as its first record, synced,
//! if that record takes at most half the file; the rest of the ended epoch's writes go to the
//! checkpoint thread, which applies them to redb in one transaction with the epoch's number.
//! Only the net state of an epoch reaches the B-tree: a record written and deleted within it
//! (most of a QoS 2 flow's) never does, nor one written in one epoch and deleted in the next
//! (a flow in progress when its epoch ended); what is still live after two epochs does.
//!
//! Two files of `log_bytes`, each written with zeros when created and then reused from its
//! start, so a sync never commits file metadata. An epoch starts only once the one before the
//! last is checkpointed (its file is then free); the store thread waits for that, never the
//! reactors. Reads go through the epoch being written, the one being checkpointed, then redb.
//! Opening replays the epochs after the last checkpointed one (each file's records up to the
//! first that is torn or of another epoch) and checkpoints them before anything else.
//!
//! Memory: the two epochs' writes, each at most what its log file holds.

mod checkpoint;
mod file;
mod layered;
mod pending;
mod prefix;
mod record;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpoint::Checkpointer;
use codec::MqttStr;
use file::LogFile;
use layered::Layered;
use pending::Pending;

use super::keyed::{self, KeyWrite, Keyed};
use super::redb::{Reads, TABLE, engine_error, open_database};
use super::{
    Committed, MessageSeq, PagedRecovered, Recovered, SessionStorage, SessionWrite, StorageError,
    StoredMessage, SyncMode,
};

const ENGINE: &str = "log";

/// The B-tree file inside the storage directory.
const DB_FILE: &str = "checkpoint.redb";
/// The two log files inside the storage directory.
const LOG_FILES: [&str; 2] = ["log-0", "log-1"];

/// The size of each log file when not given (`persistence.log_mb`'s default).
pub const DEFAULT_LOG_BYTES: u64 = 64 << 20;

/// Sessions in a log checkpointed into a redb database, in a directory.
#[derive(Debug)]
pub struct LoggedStorage {
    db: Arc<::redb::Database>,
    path: PathBuf,
    sync: SyncMode,
    keyed: Keyed,
    files: [LogFile; 2],
    /// The epoch being written (into `files[epoch % 2]`).
    epoch: u64,
    /// Its writes.
    active: Pending,
    /// The previous epoch's, until its checkpoint is done.
    checkpointing: Option<Arc<Pending>>,
    checkpointer: Checkpointer,
    /// The record being appended (kept between commits).
    record: Vec<u8>,
    /// The key writes of the batch being committed (kept between commits, empty between).
    writes: Vec<KeyWrite>,
}

impl LoggedStorage {
    /// Opens (or creates) the store in `dir` with log files of [`DEFAULT_LOG_BYTES`] and the
    /// default page cache, syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(dir, sync, super::DEFAULT_CACHE_BYTES, DEFAULT_LOG_BYTES)
    }

    /// Like [`Self::open`], with redb's page cache bounded to `cache_bytes` and each log file
    /// `log_bytes` long.
    pub fn open_with(
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
        log_bytes: u64,
    ) -> Result<Self, StorageError> {
        let (db, path) = open_database(dir, DB_FILE, cache_bytes)?;
        let db = Arc::new(db);
        let files = [
            LogFile::open(&dir.join(LOG_FILES[0]), log_bytes)?,
            LogFile::open(&dir.join(LOG_FILES[1]), log_bytes)?,
        ];
        sync_dir(dir)?;
        let mut storage = Self {
            checkpointer: Checkpointer::start(db.clone(), path.clone())?,
            db,
            path,
            sync,
            keyed: Keyed::default(),
            files,
            epoch: 0,
            active: Pending::default(),
            checkpointing: None,
            record: Vec::new(),
            writes: Vec::new(),
        };
        storage.epoch = storage.replay()? + 1;
        Ok(storage)
    }

    /// Checkpoints the epochs the logs hold after the last checkpointed one (creating the
    /// tables of a new database on the way); the last epoch the store now holds.
    fn replay(&mut self) -> Result<u64, StorageError> {
        let checkpointed = checkpoint::checkpointed(&self.db, &self.path)?;
        let mut epochs = Vec::new();
        for file in &mut self.files {
            let bytes = file.read_all()?;
            if let Some(first) = record::read(&bytes).filter(|r| r.epoch > checkpointed) {
                epochs.push((first.epoch, bytes));
            }
        }
        epochs.sort_by_key(|(epoch, _)| *epoch);
        let mut replayed = Pending::default();
        let mut last = checkpointed;
        for (epoch, bytes) in &epochs {
            replay_epoch(*epoch, bytes, &mut replayed, &self.path)?;
            last = *epoch;
        }
        checkpoint::apply(&self.db, &self.path, last, &replayed)?;
        Ok(last)
    }

    /// Runs `f` on the store as the epochs and the B-tree add up to.
    fn read<T>(
        &self,
        f: impl FnOnce(&Layered<'_, Reads<'_, ::redb::ReadOnlyTable<&[u8], &[u8]>>>) -> T,
    ) -> Result<T, StorageError> {
        let txn = self.db.begin_read().map_err(|e| self.error(e))?;
        let table = txn.open_table(TABLE).map_err(|e| self.error(e))?;
        let layered = Layered {
            epochs: [Some(&self.active), self.checkpointing.as_deref()],
            base: Reads::new(&table, &self.path),
        };
        Ok(f(&layered))
    }

    fn error(&self, e: impl std::fmt::Display) -> StorageError {
        engine_error(&self.path, &e)
    }

    /// Forgets the previous epoch's writes once its checkpoint is done.
    fn reap_checkpoint(&mut self) -> Result<(), StorageError> {
        if self.checkpointer.poll()? {
            self.checkpointing = None;
        }
        Ok(())
    }

    /// Plans `batch` with `keyed` and logs its writes; `keyed` forgets its index if that fails
    /// (it may then be ahead of the store).
    fn plan_and_log(
        &mut self,
        keyed: &mut Keyed,
        batch: &[SessionWrite],
    ) -> Result<Committed, StorageError> {
        let mut writes = std::mem::take(&mut self.writes);
        writes.clear();
        let planned = self.read(|reads| keyed.plan(reads, batch, &mut writes));
        let logged = planned
            .and_then(|planned| planned)
            .and_then(|committed| self.log(&mut writes).map(|()| committed));
        self.writes = writes;
        logged.inspect_err(|_| keyed.forget())
    }

    /// Appends `writes` to the log (durably with [`SyncMode::EveryCommit`]) and moves them to
    /// the epoch.
    fn log(&mut self, writes: &mut Vec<KeyWrite>) -> Result<(), StorageError> {
        if writes.is_empty() {
            return Ok(());
        }
        if self.active_file().is_full_for(record::encoded_len(writes)) {
            self.next_epoch()?;
        }
        self.record.clear();
        record::encode(self.epoch, writes, &mut self.record);
        let sync = self.sync == SyncMode::EveryCommit;
        let index = self.file_index();
        self.files[index].append(&self.record, sync)?;
        for write in writes.drain(..) {
            self.active.apply(write);
        }
        Ok(())
    }

    /// Ends the epoch: its file synced; the next epoch starts in the other file (free once
    /// the previous checkpoint is done) with the ended epoch's young entries carried over;
    /// the rest goes to the checkpoint thread.
    fn next_epoch(&mut self) -> Result<(), StorageError> {
        self.active_file().sync()?;
        self.checkpointer.wait()?;
        self.checkpointing = None;
        let mut ended = std::mem::take(&mut self.active);
        self.epoch += 1;
        let index = self.file_index();
        self.files[index].restart();
        self.carry(ended.take_young(self.carry_limit()))?;
        let ended = Arc::new(ended);
        self.checkpointer.submit(self.epoch - 1, ended.clone())?;
        self.checkpointing = Some(ended);
        Ok(())
    }

    /// The most an epoch carries over into the next one's log: half the file, so that an
    /// epoch always has room of its own.
    fn carry_limit(&self) -> usize {
        usize::try_from(self.active_file().capacity / 2).unwrap_or(usize::MAX)
    }

    /// Starts the new epoch's log with `carried` (entries of the ended epoch that were new
    /// there and still live at its end), durably whatever the sync mode: once the ended
    /// epoch's checkpoint commits, a restart replays from this epoch on, and the carried
    /// entries are nowhere else.
    fn carry(&mut self, carried: Vec<KeyWrite>) -> Result<(), StorageError> {
        if carried.is_empty() {
            return Ok(());
        }
        self.record.clear();
        record::encode(self.epoch, &carried, &mut self.record);
        let index = self.file_index();
        self.files[index].append(&self.record, true)?;
        for write in carried {
            self.active.apply_carried(write);
        }
        Ok(())
    }

    fn file_index(&self) -> usize {
        usize::from(self.epoch % 2 == 1)
    }

    fn active_file(&self) -> &LogFile {
        &self.files[self.file_index()]
    }

    /// Writes raw bytes under a key through the log, bypassing the format (tests corrupt data
    /// with it).
    #[cfg(test)]
    pub(super) fn put_raw(&mut self, key: &[u8], value: &[u8]) {
        let write = KeyWrite {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            absent_before: false,
        };
        self.log(&mut vec![write]).expect("test: log write");
    }
}

/// Adds the records of `epoch` at the start of `bytes` to `replayed`, up to the first that is
/// torn, zeroed or of another epoch (a tail left from an older epoch).
fn replay_epoch(
    epoch: u64,
    mut bytes: &[u8],
    replayed: &mut Pending,
    path: &Path,
) -> Result<(), StorageError> {
    while let Some(found) = record::read(bytes).filter(|r| r.epoch == epoch) {
        let writes =
            record::decode(found.body).map_err(|record::Malformed| StorageError::Corrupt {
                reason: format!(
                    "a malformed log record of epoch {epoch} beside {}",
                    path.display()
                ),
            })?;
        for write in writes {
            replayed.apply(write);
        }
        bytes = &bytes[record::HEADER + found.body.len()..];
    }
    Ok(())
}

/// Makes the directory's entries (new log files) durable.
fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    let synced = std::fs::File::open(dir).and_then(|d| d.sync_all());
    synced.map_err(|e| file_error(dir, &e))
}

fn file_error(path: &Path, e: &std::io::Error) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}

impl SessionStorage for LoggedStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        self.load_paged(usize::MAX).map(|paged| paged.recovered)
    }

    fn load_paged(&mut self, queued: usize) -> Result<PagedRecovered, StorageError> {
        self.reap_checkpoint()?;
        let mut keyed = std::mem::take(&mut self.keyed);
        let loaded = self
            .read(|reads| keyed.load(reads, queued))
            .and_then(|loaded| loaded);
        self.keyed = keyed;
        loaded
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        self.reap_checkpoint()?;
        let mut keyed = std::mem::take(&mut self.keyed);
        let logged = self.plan_and_log(&mut keyed, batch);
        self.keyed = keyed;
        logged
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.active_file().sync()
    }

    fn queued_after(
        &mut self,
        client_id: &MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        self.reap_checkpoint()?;
        self.read(|reads| keyed::queued_after(reads, client_id, after, limit))
            .and_then(|r| r)
    }
}

#[cfg(test)]
impl LoggedStorage {
    /// Log files of 1 KiB: most commits end an epoch.
    pub(super) fn open_tiny(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(dir, sync, super::DEFAULT_CACHE_BYTES, 1 << 10)
    }

    /// Log files of 1 MiB: a test's writes stay in the log.
    pub(super) fn open_roomy(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(dir, sync, super::DEFAULT_CACHE_BYTES, 1 << 20)
    }
}
