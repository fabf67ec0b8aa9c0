//! [`SledStorage`]: sessions in a sled database (the design's engine). A batch is planned from
//! the in-memory index ([`super::keyed`]) and applied as one `sled::Batch` (atomic across its
//! keys), flushed before `commit` returns with [`SyncMode::EveryCommit`]; with
//! [`SyncMode::Deferred`] `sync` flushes. One `SledStorage` is the only writer of its tree.

use std::path::{Path, PathBuf};

use codec::MqttStr;

use super::keyed::{self, Keyed, KvRead, Visit};
use super::redb_storage::{damaged_database, panic_text};
use super::salvage::files::copy_dir;
use super::salvage::image::{ImageRead, KeyImage};
use super::{
    Committed, MessageSeq, PagedRecovered, Recovered, SessionStorage, SessionWrite, StorageError,
    StoredMessage, SyncMode,
};

const ENGINE: &str = "sled";

/// How long an open waits for sled's lock on its directory: a handle dropped a moment ago
/// (a salvage opens the store it has just written) releases it only once sled's background
/// flusher thread has ended (CI saw the open fail with the lock still held). Another process
/// holding the directory is still refused, after this wait.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Sessions in a sled database directory.
#[derive(Debug)]
pub struct SledStorage {
    db: ::sled::Db,
    path: PathBuf,
    sync: SyncMode,
    keyed: Keyed,
}

impl SledStorage {
    /// Opens (or creates) the database in `dir`, syncing as `sync` says.
    pub fn open(dir: &Path, sync: SyncMode) -> Result<Self, StorageError> {
        Self::open_with_cache(dir, sync, super::DEFAULT_CACHE_BYTES)
    }

    /// Like [`Self::open`], with sled's page cache bounded to `cache_bytes`.
    pub fn open_with_cache(
        dir: &Path,
        sync: SyncMode,
        cache_bytes: u64,
    ) -> Result<Self, StorageError> {
        let open = || {
            ::sled::Config::new()
                .path(dir)
                .cache_capacity(cache_bytes)
                .open()
        };
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        let db = loop {
            // sled panics on some damage instead of returning an error: caught here, at open,
            // and named like any other damage.
            let opened = std::panic::catch_unwind(open)
                .map_err(|panic| damaged_database(ENGINE, dir, &panic_text(panic.as_ref())))?;
            match opened {
                Err(e) if is_lock_held(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(LOCK_RETRY);
                }
                opened => break opened.map_err(|e| engine_error(dir, &e))?,
            }
        };
        Ok(Self {
            db,
            path: dir.to_owned(),
            sync,
            keyed: Keyed::default(),
        })
    }

    fn reads(&self) -> Reads<'_> {
        Reads {
            db: &self.db,
            path: &self.path,
        }
    }

    fn apply(&self, writes: Vec<keyed::KeyWrite>) -> Result<(), StorageError> {
        let mut batch = ::sled::Batch::default();
        for keyed::KeyWrite { key, value, .. } in writes {
            match value {
                Some(value) => batch.insert(key, value),
                None => batch.remove(key),
            }
        }
        self.db
            .apply_batch(batch)
            .map_err(|e| engine_error(&self.path, &e))?;
        if self.sync == SyncMode::EveryCommit {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StorageError> {
        self.db.flush().map_err(|e| engine_error(&self.path, &e))?;
        Ok(())
    }

    /// Writes raw bytes under a key, bypassing the format (tests corrupt data with it).
    #[cfg(test)]
    pub(super) fn put_raw(&self, key: &[u8], value: &[u8]) {
        self.db.insert(key, value).expect("test: sled insert");
    }
}

/// The keys of the sled store in `dir`, read from a copy of it in `scratch` (sled writes
/// when it opens); what reads before an error is kept, the error reported.
pub(crate) fn image_of(dir: &Path, scratch: &Path) -> Result<ImageRead, StorageError> {
    copy_dir(dir, scratch)?;
    let mut read = ImageRead::default();
    let storage = match SledStorage::open(scratch, SyncMode::EveryCommit) {
        Ok(storage) => storage,
        Err(e) => {
            read.damaged = true;
            read.findings
                .push(format!("{} cannot be opened: {e}", dir.display()));
            return Ok(read);
        }
    };
    let mut errors = Vec::new();
    read.image = KeyImage::read_from(&storage.reads(), &mut errors);
    read.damaged = !errors.is_empty();
    (read.findings).extend(
        errors
            .into_iter()
            .map(|e| format!("{}: {e}", dir.display())),
    );
    Ok(read)
}

/// Writes `image` as a new sled store in `into`, flushed.
pub(crate) fn write_image(into: &Path, image: &KeyImage) -> Result<(), StorageError> {
    let storage = SledStorage::open(into, SyncMode::EveryCommit)?;
    let mut batch = ::sled::Batch::default();
    for (key, value) in &image.0 {
        batch.insert(key.as_slice(), value.as_slice());
    }
    (storage.db.apply_batch(batch)).map_err(|e| engine_error(into, &e))?;
    storage.flush()
}

fn engine_error(path: &Path, e: &dyn std::fmt::Display) -> StorageError {
    StorageError::Engine {
        engine: ENGINE,
        reason: format!("{}: {e}", path.display()),
    }
}

/// Reads straight from the tree: the storage is the tree's only writer, so nothing changes
/// between planning a batch and applying it.
struct Reads<'a> {
    db: &'a ::sled::Db,
    path: &'a Path,
}

impl Reads<'_> {
    fn error(&self, e: &::sled::Error) -> StorageError {
        engine_error(self.path, e)
    }

    fn visit(
        &self,
        iter: impl Iterator<Item = ::sled::Result<(::sled::IVec, ::sled::IVec)>>,
        prefix: &[u8],
        visit: Visit<'_>,
    ) -> Result<(), StorageError> {
        for kv in iter {
            let (k, v) = kv.map_err(|e| self.error(&e))?;
            if !k.starts_with(prefix) || !visit(&k, &v)? {
                break;
            }
        }
        Ok(())
    }
}

impl KvRead for Reads<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let value = self.db.get(key).map_err(|e| self.error(&e))?;
        Ok(value.map(|v| v.to_vec()))
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StorageError> {
        self.db.contains_key(key).map_err(|e| self.error(&e))
    }

    fn scan(&self, start: &[u8], prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        self.visit(self.db.range(start..), prefix, visit)
    }

    fn scan_back(&self, prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        self.visit(self.db.scan_prefix(prefix).rev(), prefix, visit)
    }
}

impl SessionStorage for SledStorage {
    fn load(&mut self) -> Result<Recovered, StorageError> {
        self.load_paged(usize::MAX).map(|paged| paged.recovered)
    }

    fn load_paged(&mut self, queued: usize) -> Result<PagedRecovered, StorageError> {
        let reads = Reads {
            db: &self.db,
            path: &self.path,
        };
        self.keyed.load(&reads, queued)
    }

    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError> {
        let reads = Reads {
            db: &self.db,
            path: &self.path,
        };
        let mut writes = Vec::new();
        let committed = self.keyed.plan(&reads, batch, &mut writes)?;
        if let Err(error) = self.apply(writes) {
            // A failed flush may leave the batch applied but not durable: rebuild either way.
            self.keyed.forget();
            return Err(error);
        }
        Ok(committed)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        self.flush()
    }

    fn queued_after(
        &mut self,
        client_id: &MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        keyed::queued_after(&self.reads(), client_id, after, limit)
    }
}

/// Whether sled refused to open because its directory's lock is held (sled 0.34 reports it as
/// an I/O error of kind `Other` naming the lock).
fn is_lock_held(error: &::sled::Error) -> bool {
    matches!(error, ::sled::Error::Io(e) if e.to_string().starts_with("could not acquire lock"))
}

#[cfg(test)]
mod lock_tests {
    use super::*;

    /// An open while another handle still holds the directory waits for it (here: a handle
    /// dropped 200 ms later) instead of failing at once.
    #[test]
    fn an_open_waits_for_a_handle_that_is_going_away() {
        let dir = crate::storage::engine_tests::temp_dir();
        let path = dir.path().join("db");
        let first = SledStorage::open(&path, SyncMode::EveryCommit).unwrap();
        let dropping = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(first);
        });
        let second = SledStorage::open(&path, SyncMode::EveryCommit);
        dropping.join().unwrap();
        assert!(second.is_ok(), "{:?}", second.err());
    }
}
