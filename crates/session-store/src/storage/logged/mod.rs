//! [`LoggedStorage`]: group commits appended to a log, checkpointed into a redb B-tree in the
//! background.
//!
//! A batch is planned from the in-memory index ([`super::keyed`]) as on the other engines; its
//! key writes become one record appended to the active log file, synced (one `write`, one
//! `fdatasync`), and are kept in memory, netted per key, as the epoch's [`Pending`] writes.
//! When a record does not fit in what is left of the file, the epoch ends: the next epoch
//! starts in the other file with the ended epoch's young entries (new in it, still live, never
//! carried before: mostly QoS 1/2 flows in progress) carried over as its first record, synced,
//! as many as half the file holds; the rest of the ended epoch's writes go to the
//! checkpoint thread, which applies them to redb in one transaction with the epoch's number.
//! Only the net state of an epoch reaches the B-tree: a record written and deleted within it
//! (most of a QoS 2 flow's) never does, nor one written in one epoch and deleted in the next
//! (a flow in progress when its epoch ended); what is still live after two epochs does.
//!
//! Two files of `log_bytes`, each written with zeros when created and then reused from its
//! start, so a sync never commits file metadata. When the flows in progress at an epoch's end
//! (inflight entries and inbound QoS 2 ids, new in it or carried into it and still not ended:
//! the epoch was too short for them) take more than half the next file, that file grows
//! (written with zeros, to four times their size, at least doubled, up to `max_bytes`) before
//! they are carried into it, first; other young entries (queued messages, which may wait
//! long for an offline session) are carried only within half the file. A heavier load
//! (larger messages, more of them in flight) so gets longer epochs instead of checkpointing
//! every flow in progress. An epoch starts only once the one
//! before the last is checkpointed (its file is then free); the store thread waits for that,
//! never the reactors. Reads go through the epoch being written, the one being checkpointed,
//! then redb. Opening replays the epochs after the last checkpointed one (each file's records
//! up to the first that is torn or of another epoch, read a record at a time) and checkpoints
//! them before anything else.
//!
//! Memory: the two epochs' writes, each at most what its log file holds (`max_bytes` at most).

mod checkpoint;
mod damage;
mod error;
mod file;
mod group;
mod layered;
mod pending;
mod prefix;
mod record;
mod scan;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use checkpoint::Checkpointer;
pub(crate) use checkpoint::Checkpoints;
use codec::MqttStr;
use error::file_error;
use file::LogFile;
use layered::Layered;
use pending::{Pending, Young};
pub(crate) use scan::{scan_store, write_image};

use super::disk::{Disk, RealDisk};
use super::keyed::{self, KeyWrite, Keyed};
use super::redb_storage::{Reads, TABLE, engine_error, open_database};
use super::{
    Committed, MessageSeq, PagedRecovered, Recovered, SessionStorage, SessionWrite, StorageError,
    StoredMessage, SyncMode,
};

/// The B-tree file inside the storage directory.
const DB_FILE: &str = "checkpoint.redb";
/// The two log files inside the storage directory.
const LOG_FILES: [&str; 2] = ["log-0", "log-1"];

/// The size of each log file when not given (`persistence.log_mb`'s default).
pub const DEFAULT_LOG_BYTES: u64 = 64 << 20;
/// The most each log file grows to when not given (`persistence.log_max_mb`'s default).
pub const DEFAULT_MAX_LOG_BYTES: u64 = 512 << 20;

/// The size of each of the two log files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSize {
    /// The size each file is created with (bytes).
    pub bytes: u64,
    /// The most a file grows to for the flows in progress at an epoch's end (bytes).
    pub max_bytes: u64,
}

impl LogSize {
    /// Files of `bytes` that never grow.
    pub fn fixed(bytes: u64) -> Self {
        Self {
            bytes,
            max_bytes: bytes,
        }
    }
}

impl Default for LogSize {
    fn default() -> Self {
        Self {
            bytes: DEFAULT_LOG_BYTES,
            max_bytes: DEFAULT_MAX_LOG_BYTES,
        }
    }
}

/// Sessions in a log checkpointed into a redb database, in a directory.
#[derive(Debug)]
pub struct LoggedStorage {
    db: Arc<::redb::Database>,
    path: PathBuf,
    sync: SyncMode,
    keyed: Keyed,
    files: [LogFile; 2],
    /// The most a log file grows to.
    max_log_bytes: u64,
    /// The epoch being written (into `files[epoch % 2]`).
    epoch: u64,
    /// Its writes.
    active: Pending,
    /// The previous epoch's, until its checkpoint is done.
    checkpointing: Option<Arc<Pending>>,
    checkpointer: Checkpointer,
    /// Buffers kept between commits.
    buffers: Buffers,
    /// Why a write or sync failed, once one did: the store then refuses every commit and
    /// sync (a failed `fdatasync` may have dropped the unsynced pages: a later sync that
    /// succeeds would not bring them back, so nothing after it may be called durable).
    failed: Option<String>,
}

/// Buffers a commit reuses.
#[derive(Debug, Default)]
struct Buffers {
    /// The record being appended.
    record: Vec<u8>,
    /// The key writes of the batch being committed (empty between commits).
    writes: Vec<KeyWrite>,
}

impl LoggedStorage {
    /// Opens (or creates) the store in `dir` with log files of the default [`LogSize`] and the
    /// default page cache, syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(dir, sync, super::DEFAULT_CACHE_BYTES, LogSize::default())
    }

    /// Like [`Self::open`], with redb's page cache bounded to `cache_bytes` and log files of
    /// `log`.
    pub fn open_with(
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
        log: LogSize,
    ) -> Result<Self, StorageError> {
        Self::open_on(
            &RealDisk,
            dir,
            sync,
            cache_bytes,
            log,
            Checkpoints::OnThread,
        )
    }

    /// Like [`Self::open_with`], with the files on `disk` and checkpoints run as `checkpoints`
    /// says.
    pub(crate) fn open_on(
        disk: &dyn Disk,
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
        log: LogSize,
        checkpoints: Checkpoints,
    ) -> Result<Self, StorageError> {
        refuse_logs_without_checkpoint(disk, dir)?;
        let (db, path) = open_database(disk, dir, DB_FILE, cache_bytes)?;
        let db = Arc::new(db);
        let files = [
            LogFile::open(disk, &dir.join(LOG_FILES[0]), log.bytes)?,
            LogFile::open(disk, &dir.join(LOG_FILES[1]), log.bytes)?,
        ];
        disk.sync_dir(dir).map_err(|e| file_error(dir, &e))?;
        let mut storage = Self {
            checkpointer: Checkpointer::start(db.clone(), path.clone(), checkpoints)?,
            db,
            path,
            sync,
            keyed: Keyed::default(),
            files,
            max_log_bytes: log.max_bytes.max(log.bytes),
            epoch: 0,
            active: Pending::default(),
            checkpointing: None,
            buffers: Buffers::default(),
            failed: None,
        };
        storage.epoch = storage.replay()? + 1;
        // Every epoch the logs held is checkpointed: the first new one starts afresh (a file
        // from before headers gets its header).
        let index = storage.file_index();
        storage.files[index].restart()?;
        Ok(storage)
    }

    /// Checkpoints the epochs the logs hold after the last checkpointed one (creating the
    /// tables of a new database on the way); the last epoch the store now holds.
    fn replay(&mut self) -> Result<u64, StorageError> {
        let checkpointed = checkpoint::checkpointed(&self.db, &self.path)?;
        let mut epochs = Vec::new();
        for file in &self.files {
            let first = file.read_record(file.start)?;
            let epoch = first.as_deref().and_then(record::read).map(|r| r.epoch);
            match epoch {
                Some(epoch) if epoch > checkpointed => epochs.push((epoch, file)),
                Some(_) => {}
                None => damage::judge_bad_start(file, checkpointed)?,
            }
        }
        epochs.sort_by_key(|(epoch, _)| *epoch);
        if let Some((first, _)) = epochs.first().filter(|(e, _)| *e > checkpointed + 1) {
            return Err(behind_the_logs(&self.path, checkpointed, *first));
        }
        let mut replayed = Pending::default();
        let mut last = checkpointed;
        for (epoch, file) in epochs {
            replay_epoch(epoch, file, &mut replayed, &self.path)?;
            last = epoch;
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

    /// The refusal of a store whose write or sync failed (see its `failed` field).
    fn refuse_after_failure(&self) -> Result<(), StorageError> {
        match &self.failed {
            None => Ok(()),
            Some(failure) => Err(StorageError::Engine {
                engine: error::ENGINE,
                reason: format!(
                    "{} refuses writes after an earlier failure ({failure}): restart to \
                     recover from the log",
                    self.path.display()
                ),
            }),
        }
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
        let mut writes = std::mem::take(&mut self.buffers.writes);
        writes.clear();
        let planned = self.read(|reads| keyed.plan(reads, batch, &mut writes));
        let logged = planned
            .and_then(|planned| planned)
            .and_then(|committed| self.log(&mut writes).map(|()| committed));
        self.buffers.writes = writes;
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
        self.buffers.record.clear();
        record::encode(self.epoch, writes, &mut self.buffers.record);
        let sync = self.sync == SyncMode::EveryCommit;
        let index = self.file_index();
        self.files[index].append(&self.buffers.record, sync)?;
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
        self.files[index].restart()?;
        let mut carried = self.carry_flows(&mut ended)?;
        let room = self
            .carry_room()
            .saturating_sub(record::encoded_len(&carried));
        carried.extend(ended.take_young(Young::Rest, room));
        self.carry(carried)?;
        let ended = Arc::new(ended);
        self.checkpointer.submit(self.epoch - 1, ended.clone())?;
        self.checkpointing = Some(ended);
        Ok(())
    }

    /// Takes the flows in progress at the end of `ended` that the new epoch carries (as many
    /// as half the largest file holds), after growing the new epoch's file for them if they
    /// take more than half of it (see [`Self::grow_for_flows`]).
    fn carry_flows(&mut self, ended: &mut Pending) -> Result<Vec<KeyWrite>, StorageError> {
        let outlived = ended.outlived_flows_len();
        let most = usize::try_from(self.max_log_bytes / 2).unwrap_or(usize::MAX);
        let flows = ended.take_young(Young::Flows, most);
        self.grow_for_flows(record::encoded_len(&flows).saturating_add(outlived))?;
        Ok(flows)
    }

    /// The most an epoch carries over into its log: half the file, so that it always has room
    /// of its own.
    fn carry_room(&self) -> usize {
        usize::try_from(self.active_file().capacity / 2).unwrap_or(usize::MAX)
    }

    /// Grows the new epoch's file, if `in_progress` bytes of flows (those just carried, and
    /// those carried into the ended epoch that outlived it: it was too short for them) take
    /// more than half of it, to four times that (at least doubled: few growths; at most
    /// `max_log_bytes`): the epoch then has three times the room of what is in progress, so
    /// that most flows end within it rather than being carried twice and checkpointed. Only
    /// flows count: they end with the client's next acknowledgement, whereas queued messages
    /// (an offline session's queue) may live long, and carrying them would only lengthen the
    /// log and the replay at start-up.
    fn grow_for_flows(&mut self, in_progress: usize) -> Result<(), StorageError> {
        let index = self.file_index();
        let capacity = self.files[index].capacity;
        if (in_progress as u64).saturating_mul(2) <= capacity {
            return Ok(());
        }
        let needed = (in_progress as u64).saturating_mul(4);
        let grown = (needed.max(capacity.saturating_mul(2)))
            .min(self.max_log_bytes)
            .max(capacity);
        if grown > capacity {
            tracing::info!(
                file = %self.path.with_file_name(LOG_FILES[index]).display(),
                from_mib = capacity >> 20,
                to_mib = grown >> 20,
                in_progress_mib = in_progress >> 20,
                "log file grows for the QoS 1/2 flows in progress (persistence.log_max_mb bounds it)"
            );
        }
        self.files[index].grow_to(grown)
    }

    /// Starts the new epoch's log with `carried` (entries of the ended epoch that were new
    /// there and still live at its end), durably whatever the sync mode: once the ended
    /// epoch's checkpoint commits, a restart replays from this epoch on, and the carried
    /// entries are nowhere else.
    fn carry(&mut self, carried: Vec<KeyWrite>) -> Result<(), StorageError> {
        if carried.is_empty() {
            return Ok(());
        }
        self.buffers.record.clear();
        record::encode(self.epoch, &carried, &mut self.buffers.record);
        let index = self.file_index();
        self.files[index].append(&self.buffers.record, true)?;
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
    pub(crate) fn put_raw(&mut self, key: &[u8], value: &[u8]) {
        let write = KeyWrite {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            absent_before: false,
        };
        self.log(&mut vec![write]).expect("test: log write");
    }
}

/// Adds the records of `epoch` at the start of `file` to `replayed`, up to the first that is
/// torn, zeroed or of another epoch (a tail left from an older epoch); refuses (corrupt) when
/// intact records of `epoch` follow a bad one (`damage.rs`), and warns of a torn last record.
fn replay_epoch(
    epoch: u64,
    file: &LogFile,
    replayed: &mut Pending,
    path: &Path,
) -> Result<(), StorageError> {
    let mut at = file.start;
    loop {
        let bytes = file.read_record(at)?;
        let Some(found) = bytes
            .as_deref()
            .and_then(record::read)
            .filter(|r| r.epoch == epoch)
        else {
            break;
        };
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
        at += (record::HEADER + found.body.len()) as u64;
    }
    if let damage::Stop::TornTail { at } = damage::judge_stop(file, at, epoch)? {
        tracing::warn!(
            file = %file.path().display(),
            offset = at,
            epoch,
            "log: the last record is torn (cut by a crash before its sync returned, so never \
             acknowledged): replay ends before it"
        );
    }
    Ok(())
}

/// Refuses a store whose checkpoint file is missing while a log file holds a record: the
/// checkpoint was deleted (it is created before the logs, and an epoch's records reach the
/// log only once it exists), and a new one would silently lose every checkpointed epoch.
/// Nothing is created then.
fn refuse_logs_without_checkpoint(disk: &dyn Disk, dir: &Path) -> Result<(), StorageError> {
    let checkpoint = dir.join(DB_FILE);
    if disk.exists(&checkpoint) {
        return Ok(());
    }
    for name in LOG_FILES {
        let path = dir.join(name);
        if !disk.exists(&path) {
            continue;
        }
        let opened = disk.open(&path).map_err(|e| file_error(&path, &e))?;
        let (file, _) = LogFile::reading(opened, &path)?;
        let first = file.read_record(file.start)?;
        if first.as_deref().and_then(record::read).is_some() {
            return Err(missing_checkpoint(&checkpoint));
        }
    }
    Ok(())
}

/// The refusal to open a store whose checkpoint file `at` is missing beside logs that hold
/// records.
fn missing_checkpoint(at: &Path) -> StorageError {
    StorageError::Corrupt {
        reason: format!(
            "{} is missing while the logs beside it hold records: the state they were \
             checkpointed into is gone, so the store was not opened and nothing was created. \
             Restore checkpoint.redb, or `{}` keeps what the logs hold",
            at.display(),
            super::salvage::files::salvage_command(at)
        ),
    }
}

/// The refusal to open a store whose checkpoint is behind its logs: a log holds epoch
/// `first` but the checkpoint `at` names only epoch `checkpointed`, though an epoch starts
/// only once the one before the last is checkpointed. The checkpoint was deleted or replaced
/// by an older copy: replaying the logs over it would silently lose every epoch between.
pub(super) fn behind_the_logs(at: &Path, checkpointed: u64, first: u64) -> StorageError {
    let dir = at.parent().unwrap_or(at);
    StorageError::Corrupt {
        reason: format!(
            "the checkpoint in {} is behind its logs: it holds epochs up to {checkpointed}, \
             the logs start at epoch {first}, so epochs {} to {} are gone (checkpoint.redb \
             deleted or replaced by an older copy); the store was not opened. Restore \
             checkpoint.redb, or `ringmq store salvage --dir {} --into NEW_DIR` keeps what \
             the logs hold",
            dir.display(),
            checkpointed + 1,
            first - 1,
            dir.display()
        ),
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
        self.refuse_after_failure()?;
        let committed = self.reap_checkpoint().and_then(|()| {
            let mut keyed = std::mem::take(&mut self.keyed);
            let logged = self.plan_and_log(&mut keyed, batch);
            self.keyed = keyed;
            logged
        });
        committed.inspect_err(|e| self.failed = Some(e.to_string()))
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.refuse_after_failure()?;
        let synced = self.active_file().sync();
        synced.inspect_err(|e| self.failed = Some(e.to_string()))
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
    pub(crate) fn open_tiny(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(
            dir,
            sync,
            super::DEFAULT_CACHE_BYTES,
            LogSize::fixed(1 << 10),
        )
    }

    /// Log files of 1 MiB: a test's writes stay in the log.
    pub(super) fn open_roomy(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with(
            dir,
            sync,
            super::DEFAULT_CACHE_BYTES,
            LogSize::fixed(1 << 20),
        )
    }
}
