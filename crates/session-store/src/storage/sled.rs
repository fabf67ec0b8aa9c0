//! [`SledStorage`]: sessions in a sled database (the design's engine). A batch is planned
//! against the tree ([`super::keyed`]) and applied as one `sled::Batch` (atomic across its
//! keys), flushed before `commit` returns with [`SyncMode::EveryCommit`]; with
//! [`SyncMode::Deferred`] `sync` flushes. One `SledStorage` is the only writer of its tree.

use std::path::{Path, PathBuf};

use super::keyed::{self, KeyValues, KvRead};
use super::{Committed, Recovered, SessionStorage, SessionWrite, StorageError, SyncMode};

const ENGINE: &str = "sled";

/// Sessions in a sled database directory.
#[derive(Debug)]
pub struct SledStorage {
    db: ::sled::Db,
    path: PathBuf,
    sync: SyncMode,
}

impl SledStorage {
    /// Opens (or creates) the database in `dir`, syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        let db = ::sled::Config::new()
            .path(dir)
            .open()
            .map_err(|e| engine_error(dir, &e))?;
        Ok(Self {
            db,
            path: dir.to_owned(),
            sync,
        })
    }

    /// Writes raw bytes under a session key, bypassing the format (tests corrupt data with it).
    #[cfg(test)]
    pub(super) fn put_raw_record(&self, client_id: &codec::MqttStr, value: &[u8]) {
        self.db
            .insert(keyed::session_key(client_id), value)
            .expect("test: sled insert");
    }
}

fn engine_error(path: &Path, e: &dyn std::fmt::Display) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}

/// Reads straight from the tree: the storage is the tree's only writer, so nothing changes
/// between planning a batch and applying it.
struct Reads<'a>(&'a SledStorage);

impl KvRead for Reads<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let value = self
            .0
            .db
            .get(key)
            .map_err(|e| engine_error(&self.0.path, &e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn scan(&self, prefix: &[u8]) -> Result<KeyValues, StorageError> {
        self.0
            .db
            .scan_prefix(prefix)
            .map(|kv| {
                let (k, v) = kv.map_err(|e| engine_error(&self.0.path, &e))?;
                Ok((k.to_vec(), v.to_vec()))
            })
            .collect()
    }
}

impl SessionStorage for SledStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        keyed::load_all(&Reads(self))
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        let (writes, committed) = keyed::plan(&Reads(self), batch)?;
        let mut sled_batch = ::sled::Batch::default();
        for (key, value) in writes {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.db
            .apply_batch(sled_batch)
            .map_err(|e| engine_error(&self.path, &e))?;
        if self.sync == SyncMode::EveryCommit {
            self.sync()?;
        }
        Ok(committed)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.db.flush().map_err(|e| engine_error(&self.path, &e))?;
        Ok(())
    }
}
