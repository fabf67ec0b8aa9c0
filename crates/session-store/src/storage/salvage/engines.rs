//! The engine-specific steps of check and salvage: scratch copies, reading a store's keys,
//! writing them as a new store, and opening a store as the broker does.

use std::path::Path;

use super::image::{ImageRead, KeyImage};
use super::report::{StoreCounts, StoreEngine};
use crate::storage::keyed::Keyed;
use crate::storage::{
    LoggedStorage, Recovered, RedbStorage, SessionStorage, SledStorage, StorageError, SyncMode,
    logged, redb_storage, sled_storage,
};

/// Refuses a salvage target that is not new or empty, or lies inside the damaged store.
pub(super) fn refuse_unfit_target(dir: &Path, into: &Path) -> Result<(), StorageError> {
    let refuse = |why: &str| StorageError::Corrupt {
        reason: format!("cannot salvage into {}: {why}", into.display()),
    };
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    if absolute(into).starts_with(absolute(dir)) {
        return Err(refuse(
            "it is inside the store being salvaged (which is never written)",
        ));
    }
    if let Ok(mut entries) = std::fs::read_dir(into)
        && entries.next().is_some()
    {
        return Err(refuse("it is not empty: give a new or empty directory"));
    }
    Ok(())
}

/// Opens the store in `dir` as the broker does and counts what it loads, or says why not.
pub(super) fn open_and_count(engine: StoreEngine, dir: &Path) -> Result<StoreCounts, String> {
    let sync = SyncMode::EveryCommit;
    let opened: Result<Box<dyn SessionStorage>, StorageError> = match engine {
        StoreEngine::Log => LoggedStorage::open(dir, sync).map(|s| Box::new(s) as _),
        StoreEngine::Redb => RedbStorage::open(dir, sync).map(|s| Box::new(s) as _),
        StoreEngine::Sled => SledStorage::open(dir, sync).map(|s| Box::new(s) as _),
    };
    let loaded = opened.and_then(|mut storage| storage.load());
    loaded
        .map(|r| StoreCounts::of(&r))
        .map_err(|e| e.to_string())
}

/// Reads the keys of the store in `dir`, with `scratch` for copies.
pub(super) fn read_image(
    engine: StoreEngine,
    dir: &Path,
    scratch: &Path,
) -> Result<ImageRead, StorageError> {
    match engine {
        StoreEngine::Log => logged::scan_store(dir, scratch),
        StoreEngine::Redb => redb_storage::image_of(dir, scratch),
        StoreEngine::Sled => sled_storage::image_of(dir, scratch),
    }
}

/// What `image` loads as, through the broker's own loader.
pub(super) fn load_image(image: &KeyImage) -> Result<Recovered, StorageError> {
    let paged = Keyed::default().load(image, usize::MAX)?;
    Ok(paged.recovered)
}

/// Writes `image` as a new store of `engine` in `into` (a log store checkpointed up to
/// `last_epoch`).
pub(super) fn write_image(
    engine: StoreEngine,
    into: &Path,
    image: &KeyImage,
    last_epoch: u64,
) -> Result<(), StorageError> {
    match engine {
        StoreEngine::Log => logged::write_image(into, image, last_epoch),
        StoreEngine::Redb => redb_storage::write_image(into, image),
        StoreEngine::Sled => sled_storage::write_image(into, image),
    }
}
