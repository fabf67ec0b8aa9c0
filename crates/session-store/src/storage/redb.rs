//! [`RedbStorage`]: sessions in a redb database file (the measured alternative to sled). A
//! batch is planned and applied in one write transaction, committed with
//! `Durability::Immediate` with [`SyncMode::EveryCommit`], or `Durability::None` with
//! [`SyncMode::Deferred`]; then `sync` commits an empty transaction with
//! `Durability::Immediate`, which makes the earlier non-durable commits durable too.

use std::path::{Path, PathBuf};

use ::redb::{Durability, ReadableTable, TableDefinition};

use super::keyed::{self, KeyValues, KvRead};
use super::{Committed, Recovered, SessionStorage, SessionWrite, StorageError, SyncMode};

const ENGINE: &str = "redb";

/// The database file inside the storage directory.
const FILE: &str = "sessions.redb";

/// Every key of the layout in [`super::keyed`] lives in this one table.
const TABLE: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("sessions");

/// Sessions in a redb database in a directory.
#[derive(Debug)]
pub struct RedbStorage {
    db: ::redb::Database,
    path: PathBuf,
    sync: SyncMode,
}

impl RedbStorage {
    /// Opens (or creates) the database in `dir` (created if missing), syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| engine_error(dir, &e))?;
        let path = dir.join(FILE);
        let db = ::redb::Database::create(&path).map_err(|e| engine_error(&path, &e))?;
        let storage = Self { db, path, sync };
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

    /// Writes raw bytes under a session key, bypassing the format (tests corrupt data with it).
    #[cfg(test)]
    pub(super) fn put_raw_record(&self, client_id: &codec::MqttStr, value: &[u8]) {
        let key = keyed::session_key(client_id);
        self.write(Durability::Immediate, |table| {
            table
                .insert(key.as_slice(), value)
                .expect("test: redb insert");
            Ok(())
        })
        .expect("test: redb write");
    }
}

fn engine_error(path: &Path, e: &dyn std::fmt::Display) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}

/// Reads from a table inside a transaction.
struct Reads<'a, T> {
    table: &'a T,
    path: &'a Path,
}

impl<T: ReadableTable<&'static [u8], &'static [u8]>> KvRead for Reads<'_, T> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let value = self
            .table
            .get(key)
            .map_err(|e| engine_error(self.path, &e))?;
        Ok(value.map(|v| v.value().to_vec()))
    }

    fn scan(&self, prefix: &[u8]) -> Result<KeyValues, StorageError> {
        let range = self
            .table
            .range(prefix..)
            .map_err(|e| engine_error(self.path, &e))?;
        let mut found = Vec::new();
        for kv in range {
            let (k, v) = kv.map_err(|e| engine_error(self.path, &e))?;
            if !k.value().starts_with(prefix) {
                break;
            }
            found.push((k.value().to_vec(), v.value().to_vec()));
        }
        Ok(found)
    }
}

impl SessionStorage for RedbStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        let txn = self.db.begin_read().map_err(|e| self.error(e))?;
        let table = txn.open_table(TABLE).map_err(|e| self.error(e))?;
        keyed::load_all(&Reads {
            table: &table,
            path: &self.path,
        })
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        let path = self.path.clone();
        self.write(self.commit_durability(), |table| {
            let reads = Reads {
                table: &*table,
                path: &path,
            };
            let (writes, committed) = keyed::plan(&reads, batch)?;
            for (key, value) in writes {
                let done = match value {
                    Some(value) => table.insert(key.as_slice(), value.as_slice()).map(drop),
                    None => table.remove(key.as_slice()).map(drop),
                };
                done.map_err(|e| engine_error(&path, &e))?;
            }
            Ok(committed)
        })
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.write(Durability::Immediate, |_| Ok(()))
    }
}
