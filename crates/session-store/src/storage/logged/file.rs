//! One log file: written with zeros to its full size when created, with a header (magic,
//! format version, checksum) at its start, then reused from just after the header for each
//! epoch it holds, so that appending and syncing inside it never changes the file's
//! size or extents (an `fdatasync` then flushes data, not metadata). A record larger than the
//! room left starts a new epoch; one larger than the whole file grows it. Between epochs a
//! file can be grown ([`LogFile::grow_to`], written with zeros like a new one).

use std::path::{Path, PathBuf};

use super::record;
use crate::storage::StorageError;
use crate::storage::disk::{Disk, DiskFile};

/// Zeros are written in chunks of this size when a file is created.
const ZERO_CHUNK: usize = 1 << 20;

/// The first bytes of every log file this format writes.
const MAGIC: [u8; 8] = *b"RINGMQlg";
/// The format this build writes, and the newest it reads.
pub(super) const FORMAT_VERSION: u32 = 1;
/// The header's bytes: the magic, the version (u32), a CRC-32 of both (u32).
pub(super) const FILE_HEADER: u64 = 16;

/// What a file's first [`FILE_HEADER`] bytes say.
#[derive(Debug, PartialEq, Eq)]
enum Start {
    /// This format's header, version `u32`.
    Header(u32),
    /// The magic with a checksum that does not hold.
    DamagedHeader,
    /// Zeros: nothing was ever written.
    Blank,
    /// Anything else: a file of the format before headers, records from byte 0.
    Headerless,
}

/// The header this build writes.
fn header_bytes() -> [u8; FILE_HEADER as usize] {
    let mut header = [0; FILE_HEADER as usize];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_be_bytes());
    let crc = crc32fast::hash(&header[..12]);
    header[12..].copy_from_slice(&crc.to_be_bytes());
    header
}

/// Reads a file's first bytes.
fn start_of(first: &[u8]) -> Start {
    if first.iter().all(|&b| b == 0) {
        return Start::Blank;
    }
    if first[..8] != MAGIC {
        return Start::Headerless;
    }
    let crc = u32::from_be_bytes(first[12..16].try_into().expect("invariant: 4 bytes"));
    if crc32fast::hash(&first[..12]) != crc {
        return Start::DamagedHeader;
    }
    Start::Header(u32::from_be_bytes(
        first[8..12].try_into().expect("invariant: 4 bytes"),
    ))
}

/// A log file and where the next record goes.
#[derive(Debug)]
pub(super) struct LogFile {
    file: Box<dyn DiskFile>,
    path: PathBuf,
    /// The bytes an epoch fills before the next one starts.
    pub(super) capacity: u64,
    /// Where records begin: after the header, or at 0 in a file written before headers
    /// (until its next epoch, which writes the header first).
    pub(super) start: u64,
    /// Where the next record is written.
    pub(super) end: u64,
}

impl LogFile {
    /// Opens (or creates, written with zeros to `capacity` bytes) the log at `path` on `disk`.
    pub(super) fn open(disk: &dyn Disk, path: &Path, capacity: u64) -> Result<Self, StorageError> {
        let error = |e: std::io::Error| super::error::file_error(path, &e);
        let file = disk.open(path).map_err(error)?;
        let len = file.len().map_err(error)?;
        if len < capacity {
            fill_with_zeros(&*file, len, capacity).map_err(error)?;
        }
        let mut first = [0; FILE_HEADER as usize];
        file.read_exact_at(&mut first, 0).map_err(error)?;
        let start = match start_of(&first) {
            Start::Header(version) if version <= FORMAT_VERSION => FILE_HEADER,
            Start::Header(version) => return Err(newer_format(path, version)),
            Start::DamagedHeader => return Err(damaged_header(path)),
            Start::Headerless => 0,
            Start::Blank => {
                file.write_all_at(&header_bytes(), 0).map_err(error)?;
                file.sync_data().map_err(error)?;
                FILE_HEADER
            }
        };
        Ok(Self {
            file,
            path: path.to_path_buf(),
            capacity,
            start,
            end: start,
        })
    }

    /// Opens the log at `path` to read it only (nothing is written, even to a blank file);
    /// what its header says is reported, not refused: a damaged header reads as this
    /// format's.
    pub(super) fn read_only(path: &Path) -> Result<(Self, String), StorageError> {
        let error = |e: std::io::Error| super::error::file_error(path, &e);
        let file = std::fs::File::open(path).map_err(error)?;
        Self::reading(Box::new(file), path)
    }

    /// Reads `file`, the log at `path`, without writing it (see [`Self::read_only`]).
    pub(super) fn reading(
        file: Box<dyn DiskFile>,
        path: &Path,
    ) -> Result<(Self, String), StorageError> {
        let error = |e: std::io::Error| super::error::file_error(path, &e);
        let capacity = file.len().map_err(error)?;
        let mut first = [0; FILE_HEADER as usize];
        let read = file.read_exact_at(&mut first, 0);
        let (start, header) = match read.map(|()| start_of(&first)) {
            Err(_) => (FILE_HEADER, "shorter than a header".to_owned()),
            Ok(Start::Header(version)) => (FILE_HEADER, format!("format {version}")),
            Ok(Start::DamagedHeader) => (FILE_HEADER, "a damaged header".to_owned()),
            Ok(Start::Blank) => (FILE_HEADER, "never written".to_owned()),
            Ok(Start::Headerless) => (0, "the format before headers".to_owned()),
        };
        let file = Self {
            file,
            path: path.to_path_buf(),
            capacity,
            start,
            end: start,
        };
        Ok((file, header))
    }

    /// The bytes of the record (header and body) that starts at `at` as its header gives its
    /// length, if the file holds that many (not checked: [`record::read`] does). Replay reads
    /// a record at a time, never the whole file (a grown file can be hundreds of MiB of which
    /// the last epoch used little).
    pub(super) fn read_record(&self, at: u64) -> Result<Option<Vec<u8>>, StorageError> {
        let error = |e: std::io::Error| super::error::file_error(&self.path, &e);
        let len = self.file.len().map_err(error)?;
        let mut header = [0; record::HEADER];
        if at.saturating_add(record::HEADER as u64) > len {
            return Ok(None);
        }
        self.file.read_exact_at(&mut header, at).map_err(error)?;
        let body_len = u64::from(u32::from_be_bytes([
            header[0], header[1], header[2], header[3],
        ]));
        let end = at + record::HEADER as u64 + body_len;
        if end > len {
            return Ok(None);
        }
        let whole = usize::try_from(end - at).map_err(|_| {
            super::error::file_error(&self.path, &std::io::Error::other("a record beyond memory"))
        })?;
        let mut bytes = vec![0; whole];
        self.file.read_exact_at(&mut bytes, at).map_err(error)?;
        Ok(Some(bytes))
    }

    /// The file's path.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes.
    pub(super) fn len(&self) -> Result<u64, StorageError> {
        let error = |e: std::io::Error| super::error::file_error(&self.path, &e);
        self.file.len().map_err(error)
    }

    /// The `n` bytes at `at`, if the file holds them.
    pub(super) fn read_at(&self, at: u64, n: usize) -> Result<Option<Vec<u8>>, StorageError> {
        if at.saturating_add(n as u64) > self.len()? {
            return Ok(None);
        }
        let mut bytes = vec![0; n];
        (self.file.read_exact_at(&mut bytes, at))
            .map_err(|e| super::error::file_error(&self.path, &e))?;
        Ok(Some(bytes))
    }

    /// Whether a record of `len` bytes should start a new epoch instead (it does not fit in
    /// what is left, and this epoch holds something already).
    pub(super) fn is_full_for(&self, len: usize) -> bool {
        self.end > self.start && self.end + len as u64 > self.capacity
    }

    /// Writes `record` after the previous one (the end moves only if the whole write
    /// succeeded) and, with `sync`, makes it durable.
    pub(super) fn append(&mut self, record: &[u8], sync: bool) -> Result<(), StorageError> {
        let error = |e: std::io::Error| super::error::file_error(&self.path, &e);
        self.file.write_all_at(record, self.end).map_err(error)?;
        if sync {
            self.file.sync_data().map_err(error)?;
        }
        self.end += record.len() as u64;
        Ok(())
    }

    /// Makes every record written durable.
    pub(super) fn sync(&self) -> Result<(), StorageError> {
        (self.file.sync_data()).map_err(|e| super::error::file_error(&self.path, &e))
    }

    /// Raises the capacity to `capacity` bytes, writing zeros past the file's end first (a
    /// file already that long, grown before a restart, is only reused).
    pub(super) fn grow_to(&mut self, capacity: u64) -> Result<(), StorageError> {
        let error = |e: std::io::Error| super::error::file_error(&self.path, &e);
        let len = self.file.len().map_err(error)?;
        if len < capacity {
            fill_with_zeros(&*self.file, len, capacity).map_err(error)?;
        }
        self.capacity = self.capacity.max(capacity);
        Ok(())
    }

    /// Starts writing from the beginning again (a new epoch, the old one checkpointed); a
    /// file from before headers gets its header first (made durable with the epoch's first
    /// record; a crash before that leaves a header over a checkpointed epoch, read as the end).
    pub(super) fn restart(&mut self) -> Result<(), StorageError> {
        if self.start == 0 {
            let error = |e: std::io::Error| super::error::file_error(&self.path, &e);
            self.file.write_all_at(&header_bytes(), 0).map_err(error)?;
            self.start = FILE_HEADER;
        }
        self.end = self.start;
        Ok(())
    }
}

/// Writes zeros from `from` to `to` and syncs the file with its new size.
fn fill_with_zeros(file: &dyn DiskFile, from: u64, to: u64) -> std::io::Result<()> {
    let zeros = vec![0; ZERO_CHUNK];
    let mut at = from;
    while at < to {
        let n = usize::try_from(to - at).map_or(ZERO_CHUNK, |left| left.min(ZERO_CHUNK));
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
}

/// The refusal to open a log written by a newer format.
fn newer_format(path: &Path, version: u32) -> StorageError {
    StorageError::Corrupt {
        reason: format!(
            "{} is a log of format {version}, written by a newer RingMQ (this one reads up to \
             format {FORMAT_VERSION}): start that version on this directory, or move the \
             directory aside",
            path.display()
        ),
    }
}

/// The refusal to open a log whose header is damaged.
fn damaged_header(path: &Path) -> StorageError {
    StorageError::Corrupt {
        reason: format!(
            "{} is damaged: its header (magic, format version) fails its checksum; the store \
             was not opened. Keep a copy of the directory; then restore it from a backup, or \
             move this log file aside to start from the last checkpoint",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_this_format() {
        assert_eq!(start_of(&header_bytes()), Start::Header(FORMAT_VERSION));
        assert_eq!(start_of(&[0; 16]), Start::Blank);
        let mut flipped = header_bytes();
        flipped[9] ^= 1;
        assert_eq!(start_of(&flipped), Start::DamagedHeader);
        assert_eq!(start_of(&[7; 16]), Start::Headerless);
    }
}
