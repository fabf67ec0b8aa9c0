//! [`RedbStorage`]: sessions in a redb database file (the measured alternative to sled). A
//! batch is planned from the in-memory index ([`super::keyed`]) and applied in one write
//! transaction, committed with
//! `Durability::Immediate` with [`SyncMode::EveryCommit`], or `Durability::None` with
//! [`SyncMode::Deferred`]; then `sync` commits an empty transaction with
//! `Durability::Immediate`, which makes the earlier non-durable commits durable too.

use std::path::{Path, PathBuf};

use ::redb::{Durability, ReadableTable, TableDefinition};

use codec::MqttStr;

use super::disk::{Disk, RealDisk};
use super::keyed::{self, Keyed, KvRead, Visit};
use super::salvage::files as salvage;
use super::salvage::image::{ImageRead, KeyImage};
use super::{
    Committed, MessageSeq, PagedRecovered, Recovered, SessionStorage, SessionWrite, StorageError,
    StoredMessage, SyncMode,
};

const ENGINE: &str = "redb";

/// The database file inside the storage directory.
const FILE: &str = "sessions.redb";

/// Every key of the layout in [`super::keyed`] lives in this one table.
pub(super) const TABLE: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("sessions");

/// Sessions in a redb database in a directory.
#[derive(Debug)]
pub struct RedbStorage {
    db: ::redb::Database,
    path: PathBuf,
    sync: SyncMode,
    keyed: Keyed,
}

impl RedbStorage {
    /// Opens (or creates) the database in `dir` (created if missing), syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with_cache(dir, sync, super::DEFAULT_CACHE_BYTES)
    }

    /// Like [`Self::open`], with redb's page cache bounded to `cache_bytes`.
    pub fn open_with_cache(
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
    ) -> Result<Self, StorageError> {
        Self::open_on(&RealDisk, dir, sync, cache_bytes)
    }

    /// Like [`Self::open_with_cache`], with the database file on `disk`.
    pub(crate) fn open_on(
        disk: &dyn Disk,
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
    ) -> Result<Self, StorageError> {
        let (db, path) = open_database(disk, dir, FILE, cache_bytes)?;
        let storage = Self {
            db,
            path,
            sync,
            keyed: Keyed::default(),
        };
        // Create the table (durably), so that reads of a fresh database find it.
        storage.write(Durability::Immediate, |_| Ok(()))?;
        Ok(storage)
    }

    /// The durability of a batch's transaction.
    fn commit_durability(&self) -> Durability {
        match self.sync {
            SyncMode::EveryCommit => Durability::Immediate,
            SyncMode::Deferred => Durability::None,
        }
    }

    fn error(&self, e: impl std::fmt::Display) -> StorageError {
        engine_error(&self.path, &e)
    }

    /// Runs `f` on the table in one write transaction and commits it with `durability`.
    fn write<T>(
        &self,
        durability: Durability,
        f: impl FnOnce(&mut ::redb::Table<'_, &[u8], &[u8]>) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let mut txn = self.db.begin_write().map_err(|e| self.error(e))?;
        txn.set_durability(durability);
        let done = {
            let mut table = txn.open_table(TABLE).map_err(|e| self.error(e))?;
            // An error here drops the transaction uncommitted: nothing of it is kept.
            f(&mut table)?
        };
        txn.commit().map_err(|e| self.error(e))?;
        Ok(done)
    }

    /// Writes raw bytes under a key, bypassing the format (tests corrupt data with it).
    #[cfg(test)]
    pub(crate) fn put_raw(&self, key: &[u8], value: &[u8]) {
        self.write(Durability::Immediate, |table| {
            table.insert(key, value).expect("test: redb insert");
            Ok(())
        })
        .expect("test: redb write");
    }

    /// Runs `f` on the table in a read transaction.
    fn read<T>(
        &self,
        f: impl FnOnce(&Reads<'_, ::redb::ReadOnlyTable<&[u8], &[u8]>>) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let txn = self.db.begin_read().map_err(|e| self.error(e))?;
        let table = txn.open_table(TABLE).map_err(|e| self.error(e))?;
        f(&Reads {
            table: &table,
            path: &self.path,
        })
    }
}

/// Opens (or creates) the redb database `file` in `dir` (created if missing) on `disk`, with
/// its page cache bounded to `cache_bytes`; the database and its path. The directory is
/// synced once the file exists, so that a new database's entry survives a power cut.
pub(super) fn open_database(
    disk: &dyn Disk,
    dir: &Path,
    file: &str,
    cache_bytes: u64,
) -> Result<(::redb::Database, PathBuf), StorageError> {
    disk.create_dir_all(dir)
        .map_err(|e| engine_error(dir, &e))?;
    let path = dir.join(file);
    let mut builder = ::redb::Builder::new();
    builder.set_cache_size(usize::try_from(cache_bytes).unwrap_or(usize::MAX));
    let create = || disk.open_redb(&builder, &path);
    // redb asserts on some damage (a file shorter than its header says) instead of returning
    // an error: caught here, at open, and named like any other damage.
    let db = std::panic::catch_unwind(std::panic::AssertUnwindSafe(create))
        .map_err(|panic| damaged_database(ENGINE, &path, &panic_text(panic.as_ref())))?
        .map_err(|e| match e {
            ::redb::DatabaseError::Storage(::redb::StorageError::Corrupted(what)) => {
                damaged_database(ENGINE, &path, &what)
            }
            e => engine_error(&path, &e),
        })?;
    disk.sync_dir(dir).map_err(|e| engine_error(dir, &e))?;
    Ok((db, path))
}

/// The text of a caught panic's payload.
pub(super) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

/// The refusal to open a store file (or directory) `engine` stopped on.
pub(super) fn damaged_database(engine: &str, path: &Path, what: &str) -> StorageError {
    StorageError::Corrupt {
        reason: format!(
            "{} is damaged ({engine} stopped opening it: {what}); the store was not opened. Keep \
             a copy of the directory; `{}` reports what is intact and `{}` copies it into a new \
             store; or restore the directory from a backup",
            path.display(),
            salvage::check_command(path),
            salvage::salvage_command(path)
        ),
    }
}

pub(super) fn engine_error(path: &Path, e: &dyn std::fmt::Display) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}

/// Reads from a table inside a transaction.
pub(super) struct Reads<'a, T> {
    table: &'a T,
    path: &'a Path,
}

impl<'a, T: ReadableTable<&'static [u8], &'static [u8]>> Reads<'a, T> {
    /// Reads of `table` in the database at `path` (named in errors).
    pub(super) fn new(table: &'a T, path: &'a Path) -> Self {
        Self { table, path }
    }

    fn error(&self, e: impl std::fmt::Display) -> StorageError {
        engine_error(self.path, &e)
    }

    fn visit<'r>(
        &self,
        range: impl Iterator<Item = RangeItem<'r>>,
        prefix: &[u8],
        visit: Visit<'_>,
    ) -> Result<(), StorageError> {
        for kv in range {
            let (k, v) = kv.map_err(|e| self.error(e))?;
            if !k.value().starts_with(prefix) || !visit(k.value(), v.value())? {
                break;
            }
        }
        Ok(())
    }
}

/// What a range of the table yields.
type RangeItem<'r> = Result<
    (
        ::redb::AccessGuard<'r, &'static [u8]>,
        ::redb::AccessGuard<'r, &'static [u8]>,
    ),
    ::redb::StorageError,
>;

impl<T: ReadableTable<&'static [u8], &'static [u8]>> KvRead for Reads<'_, T> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let value = self.table.get(key).map_err(|e| self.error(e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StorageError> {
        let value = self.table.get(key).map_err(|e| self.error(e))?;
        Ok(value.is_some())
    }

    fn scan(&self, start: &[u8], prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        let range = self.table.range(start..).map_err(|e| self.error(e))?;
        self.visit(range, prefix, visit)
    }

    fn scan_back(&self, prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        let range = match keyed::prefix_end(prefix) {
            Some(end) => self.table.range(prefix..end.as_slice()),
            None => self.table.range(prefix..),
        };
        self.visit(range.map_err(|e| self.error(e))?.rev(), prefix, visit)
    }
}

impl SessionStorage for RedbStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        self.load_paged(usize::MAX).map(|paged| paged.recovered)
    }

    fn load_paged(&mut self, queued: usize) -> Result<PagedRecovered, StorageError> {
        let mut keyed = std::mem::take(&mut self.keyed);
        let loaded = self.read(|reads| keyed.load(reads, queued));
        self.keyed = keyed;
        loaded
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        let mut keyed = std::mem::take(&mut self.keyed);
        let path = self.path.clone();
        let committed = self.write(self.commit_durability(), |table| {
            let reads = Reads {
                table: &*table,
                path: &path,
            };
            let mut writes = Vec::new();
            let committed = keyed.plan(&reads, batch, &mut writes)?;
            // In key order: neighbouring keys share pages.
            writes.sort_unstable_by(|a, b| a.key.cmp(&b.key));
            for keyed::KeyWrite { key, value, .. } in writes {
                let done = match value {
                    Some(value) => table.insert(key.as_slice(), value.as_slice()).map(drop),
                    None => table.remove(key.as_slice()).map(drop),
                };
                done.map_err(|e| engine_error(&path, &e))?;
            }
            Ok(committed)
        });
        if committed.is_err() {
            keyed.forget();
        }
        self.keyed = keyed;
        committed
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.write(Durability::Immediate, |_| Ok(()))
    }

    fn queued_after(
        &mut self,
        client_id: &MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        self.read(|reads| keyed::queued_after(reads, client_id, after, limit))
    }
}

/// The keys of the redb store in `dir`, read from a copy in `scratch` (opening redb may
/// repair the file); what reads before an error is kept, the error reported.
pub(crate) fn image_of(dir: &Path, scratch: &Path) -> Result<ImageRead, StorageError> {
    let path = dir.join(FILE);
    std::fs::copy(&path, scratch.join(FILE)).map_err(|e| engine_error(&path, &e))?;
    let mut read = ImageRead::default();
    let (db, _) = match open_database(&RealDisk, scratch, FILE, super::DEFAULT_CACHE_BYTES) {
        Ok(opened) => opened,
        Err(e) => {
            read.damaged = true;
            read.findings
                .push(format!("{} cannot be opened: {e}", path.display()));
            return Ok(read);
        }
    };
    let txn = db.begin_read().map_err(|e| engine_error(&path, &e))?;
    let table = match txn.open_table(TABLE) {
        Ok(table) => table,
        Err(::redb::TableError::TableDoesNotExist(_)) => return Ok(read),
        Err(e) => return Err(engine_error(&path, &e)),
    };
    let mut errors = Vec::new();
    read.image = KeyImage::read_from(&Reads::new(&table, &path), &mut errors);
    read.damaged = !errors.is_empty();
    (read.findings).extend(
        errors
            .into_iter()
            .map(|e| format!("{}: {e}", path.display())),
    );
    Ok(read)
}

/// Writes `image` as a new redb store in `into`.
pub(crate) fn write_image(into: &Path, image: &KeyImage) -> Result<(), StorageError> {
    let (db, path) = open_database(&RealDisk, into, FILE, super::DEFAULT_CACHE_BYTES)?;
    let storage = RedbStorage {
        db,
        path,
        sync: SyncMode::EveryCommit,
        keyed: Keyed::default(),
    };
    storage.write(Durability::Immediate, |table| {
        for (key, value) in &image.0 {
            let inserted = table.insert(key.as_slice(), value.as_slice());
            inserted.map_err(|e| engine_error(&storage.path, &e))?;
        }
        Ok(())
    })
}
