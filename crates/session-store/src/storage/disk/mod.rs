//! The seam under the durable engines' files: [`Disk`] opens files and syncs directories,
//! [`DiskFile`] reads, writes and syncs one file. [`RealDisk`] is the file system; the tests'
//! simulated disk (`sim.rs`) keeps written-but-unsynced data apart from synced data, so that a
//! test can cut the power at any write or sync, fail one, or shorten writes.
//!
//! The log engine's files go through it, and so does its redb checkpoint (through redb's own
//! `StorageBackend` trait). Engines call it once per write or sync, behind a `dyn`: beside an
//! `fdatasync` the indirect call costs nothing measurable.

#[cfg(test)]
pub(crate) mod sim;

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Where a durable engine's files live.
pub(crate) trait Disk: Send + Sync + Debug {
    /// Opens `path` for reading and writing, created (empty) if missing.
    fn open(&self, path: &Path) -> io::Result<Box<dyn DiskFile>>;

    /// Whether a file is at `path`.
    fn exists(&self, path: &Path) -> bool;

    /// Creates `dir` and its parents where missing.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Makes `dir`'s entries (files created in it) durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Opens (or creates) the redb database at `path` with `builder`'s settings.
    fn open_redb(
        &self,
        builder: &::redb::Builder,
        path: &Path,
    ) -> Result<::redb::Database, ::redb::DatabaseError>;
}

/// One open file.
pub(crate) trait DiskFile: Send + Sync + Debug {
    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Fills `buf` from the bytes at `at` (an error if the file ends first).
    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()>;

    /// Writes some of `buf` at `at`; how many bytes (may be fewer than asked).
    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize>;

    /// Makes the data written so far durable (and the length, where it changed).
    fn sync_data(&self) -> io::Result<()>;

    /// Writes all of `buf` at `at`, however many writes that takes.
    fn write_all_at(&self, mut buf: &[u8], mut at: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, at) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    buf = &buf[n..];
                    at += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The file system.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RealDisk;

impl Disk for RealDisk {
    fn open(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        Ok(Box::new(options.open(path)?))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir).and_then(|d| d.sync_all())
    }

    fn open_redb(
        &self,
        builder: &::redb::Builder,
        path: &Path,
    ) -> Result<::redb::Database, ::redb::DatabaseError> {
        builder.create(path)
    }
}

impl DiskFile for File {
    fn len(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, at)
    }

    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize> {
        FileExt::write_at(self, buf, at)
    }

    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
}
