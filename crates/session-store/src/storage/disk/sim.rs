//! A simulated disk for tests: every file keeps what was synced apart from the writes since
//! (as a disk's cache does), and every write, length change and sync is recorded in order, so
//! that the disk as it stood at any of them can be rebuilt ([`Platter::apply`]) and a power
//! cut there simulated ([`Platter::cut`]): every unsynced change lost, or an arbitrary prefix
//! of them kept, or that and the next write torn at a sector boundary. A file created but not
//! yet named durably (its directory not synced) is lost by a cut. Faults: one chosen write or
//! sync fails (EIO, ENOSPC), and writes can be short.
//!
//! A failed sync discards the file's unsynced changes from what can reach the platter, though
//! reads still see them: what Linux does with the dirty pages of a failed `fsync`.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Disk, DiskFile};

/// The size of the unit a disk writes whole: a torn write keeps whole sectors.
pub(crate) const SECTOR: u64 = 512;

/// A change to a file not yet synced.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    Write { at: u64, bytes: Vec<u8> },
    SetLen(u64),
}

impl Change {
    fn apply(&self, content: &mut Vec<u8>) {
        match self {
            Self::Write { at, bytes } => {
                let at = usize::try_from(*at).expect("test: offset in memory");
                if content.len() < at + bytes.len() {
                    content.resize(at + bytes.len(), 0);
                }
                content[at..at + bytes.len()].copy_from_slice(bytes);
            }
            Self::SetLen(len) => {
                content.resize(usize::try_from(*len).expect("test: length in memory"), 0);
            }
        }
    }
}

/// One file: what a power cut keeps, and what reads see.
#[derive(Debug, Clone, Default)]
struct SimFile {
    durable: Vec<u8>,
    visible: Vec<u8>,
    unsynced: Vec<Change>,
    /// Whether its directory entry is durable.
    named: bool,
}

/// What the disk saw, in order.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Create(PathBuf),
    Change(PathBuf, Change),
    Sync(PathBuf),
    /// A sync that failed: the file's unsynced changes will never reach the platter.
    SyncFailed(PathBuf),
    SyncDir(PathBuf),
}

/// How a power cut treats the changes not yet synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// All lost.
    DropUnsynced,
    /// A prefix of each file's kept (any length, drawn per file).
    KeepPrefix,
    /// A prefix kept and the next write torn: some of its leading sectors written.
    TearNext,
}

impl Cut {
    pub(crate) const ALL: [Cut; 3] = [Cut::DropUnsynced, Cut::KeepPrefix, Cut::TearNext];
}

/// Every file of the disk.
#[derive(Debug, Clone, Default)]
pub(crate) struct Platter {
    files: BTreeMap<PathBuf, SimFile>,
}

impl Platter {
    /// Applies one recorded operation.
    pub(crate) fn apply(&mut self, op: &Op) {
        match op {
            Op::Create(path) => {
                self.files.entry(path.clone()).or_default();
            }
            Op::Change(path, change) => {
                let file = self.file(path);
                change.apply(&mut file.visible);
                file.unsynced.push(change.clone());
            }
            Op::Sync(path) => {
                let file = self.file(path);
                for change in file.unsynced.drain(..) {
                    change.apply(&mut file.durable);
                }
            }
            Op::SyncFailed(path) => self.file(path).unsynced.clear(),
            Op::SyncDir(dir) => {
                let inside = self
                    .files
                    .iter_mut()
                    .filter(|(p, _)| p.parent() == Some(dir));
                for (_, file) in inside {
                    file.named = true;
                }
            }
        }
    }

    fn file(&mut self, path: &Path) -> &mut SimFile {
        self.files
            .get_mut(path)
            .expect("test: an operation on a file the disk has")
    }

    /// The disk after a power cut now, cut as `how` says; `draw(n)` picks a number below `n`.
    pub(crate) fn cut(&self, how: Cut, draw: &mut impl FnMut(u64) -> u64) -> Platter {
        let files = (self.files.iter())
            .filter(|(_, file)| file.named)
            .map(|(path, file)| (path.clone(), file.after_cut(how, draw)))
            .collect();
        Platter { files }
    }

    /// The bytes of `path`, as reads see them.
    pub(crate) fn contents(&self, path: &Path) -> Option<&[u8]> {
        self.files.get(path).map(|file| file.visible.as_slice())
    }
}

impl SimFile {
    fn after_cut(&self, how: Cut, draw: &mut impl FnMut(u64) -> u64) -> SimFile {
        let mut content = self.durable.clone();
        let pending = self.unsynced.len() as u64;
        let kept = match how {
            Cut::DropUnsynced => 0,
            Cut::KeepPrefix => draw(pending + 1),
            Cut::TearNext => draw(pending + 1).min(pending.saturating_sub(1)),
        };
        let kept = usize::try_from(kept).expect("test: a count in memory");
        for change in &self.unsynced[..kept] {
            change.apply(&mut content);
        }
        if how == Cut::TearNext
            && let Some(Change::Write { at, bytes }) = self.unsynced.get(kept)
        {
            torn(*at, bytes, draw).apply(&mut content);
        }
        SimFile {
            durable: content.clone(),
            visible: content,
            unsynced: Vec::new(),
            named: true,
        }
    }
}

/// The leading whole sectors of a write of `bytes` at `at` that reached the platter (some,
/// maybe none, never all).
fn torn(at: u64, bytes: &[u8], draw: &mut impl FnMut(u64) -> u64) -> Change {
    let end = at + bytes.len() as u64;
    let first_boundary = (at / SECTOR + 1) * SECTOR;
    let boundaries = end.saturating_sub(1).saturating_sub(first_boundary) / SECTOR
        + u64::from(first_boundary < end);
    let kept_to = match boundaries {
        0 => at,
        n => first_boundary + draw(n) * SECTOR,
    };
    let len = usize::try_from(kept_to - at).expect("test: a length in memory");
    Change::Write {
        at,
        bytes: bytes[..len].to_vec(),
    }
}

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The `nth` write or sync after the fault is injected (from 0, over every file) fails
    /// with `errno`.
    Fail { nth: usize, errno: i32 },
    /// Every write writes at most half of what it was given (rounded up).
    ShortWrites,
}

#[derive(Debug, Default)]
struct State {
    platter: Platter,
    ops: Vec<Op>,
    /// Writes and syncs so far (what [`Fault::Fail`] counts).
    io_count: usize,
    faults: Vec<Fault>,
}

/// The simulated disk; clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl SimDisk {
    /// A disk holding `platter`'s files (as after a power cut: all of it durable).
    pub(crate) fn holding(platter: Platter) -> Self {
        let state = State {
            platter,
            ..State::default()
        };
        Self {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Injects `fault` from now on.
    pub(crate) fn inject(&self, fault: Fault) {
        let mut state = self.lock();
        let fault = match fault {
            Fault::Fail { nth, errno } => Fault::Fail {
                nth: nth + state.io_count,
                errno,
            },
            Fault::ShortWrites => Fault::ShortWrites,
        };
        state.faults.push(fault);
    }

    /// Every operation so far, in order.
    pub(crate) fn ops(&self) -> Vec<Op> {
        self.lock().ops.clone()
    }

    /// How many operations so far.
    pub(crate) fn op_count(&self) -> usize {
        self.lock().ops.len()
    }

    /// The disk's files now.
    pub(crate) fn platter(&self) -> Platter {
        self.lock().platter.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("test: the simulated disk's lock")
    }
}

impl State {
    fn record(&mut self, op: Op) {
        self.platter.apply(&op);
        self.ops.push(op);
    }

    /// Counts a write or sync; the error it is to fail with, if one is injected.
    fn next_io(&mut self) -> Option<io::Error> {
        let nth = self.io_count;
        self.io_count += 1;
        self.faults.iter().find_map(|fault| match fault {
            Fault::Fail { nth: n, errno } if *n == nth => {
                Some(io::Error::from_raw_os_error(*errno))
            }
            _ => None,
        })
    }

    fn short_writes(&self) -> bool {
        self.faults.contains(&Fault::ShortWrites)
    }
}

impl Disk for SimDisk {
    fn open(&self, path: &Path) -> io::Result<Box<dyn DiskFile>> {
        Ok(Box::new(self.open_file(path)))
    }

    fn exists(&self, path: &Path) -> bool {
        self.lock().platter.files.contains_key(path)
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut state = self.lock();
        if let Some(e) = state.next_io() {
            return Err(e);
        }
        state.record(Op::SyncDir(dir.to_owned()));
        Ok(())
    }

    fn open_redb(
        &self,
        builder: &::redb::Builder,
        path: &Path,
    ) -> Result<::redb::Database, ::redb::DatabaseError> {
        builder.create_with_backend(self.open_file(path))
    }
}

impl SimDisk {
    fn open_file(&self, path: &Path) -> SimFileHandle {
        let mut state = self.lock();
        if !state.platter.files.contains_key(path) {
            state.record(Op::Create(path.to_owned()));
        }
        SimFileHandle {
            disk: self.clone(),
            path: path.to_owned(),
        }
    }
}

/// An open file of a [`SimDisk`].
#[derive(Debug)]
pub(crate) struct SimFileHandle {
    disk: SimDisk,
    path: PathBuf,
}

impl SimFileHandle {
    fn change(&self, change: Change) -> io::Result<()> {
        let mut state = self.disk.lock();
        if let Some(e) = state.next_io() {
            return Err(e);
        }
        state.record(Op::Change(self.path.clone(), change));
        Ok(())
    }

    fn visible_len(&self) -> u64 {
        let state = self.disk.lock();
        state
            .platter
            .contents(&self.path)
            .map_or(0, |c| c.len() as u64)
    }
}

impl DiskFile for SimFileHandle {
    fn len(&self) -> io::Result<u64> {
        Ok(self.visible_len())
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        let state = self.disk.lock();
        let content = state.platter.contents(&self.path).unwrap_or_default();
        let start = usize::try_from(at).map_err(io::Error::other)?;
        let Some(bytes) = content.get(start..start + buf.len()) else {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        };
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn write_at(&self, buf: &[u8], at: u64) -> io::Result<usize> {
        let short = self.disk.lock().short_writes();
        let n = if short {
            buf.len().div_ceil(2)
        } else {
            buf.len()
        };
        self.change(Change::Write {
            at,
            bytes: buf[..n].to_vec(),
        })?;
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut state = self.disk.lock();
        if let Some(e) = state.next_io() {
            state.record(Op::SyncFailed(self.path.clone()));
            return Err(e);
        }
        state.record(Op::Sync(self.path.clone()));
        Ok(())
    }
}

impl ::redb::StorageBackend for SimFileHandle {
    fn len(&self) -> io::Result<u64> {
        Ok(self.visible_len())
    }

    fn read(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.change(Change::SetLen(len))
    }

    fn sync_data(&self, _eventual: bool) -> io::Result<()> {
        DiskFile::sync_data(self)
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_all_at(data, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(platter: &mut Platter, path: &Path, at: u64, bytes: &[u8]) {
        let change = Change::Write {
            at,
            bytes: bytes.to_vec(),
        };
        platter.apply(&Op::Change(path.to_owned(), change));
    }

    #[test]
    fn a_cut_keeps_what_was_synced_and_a_prefix_of_the_rest() {
        let path = Path::new("/d/f");
        let mut platter = Platter::default();
        platter.apply(&Op::Create(path.to_owned()));
        platter.apply(&Op::SyncDir(PathBuf::from("/d")));
        write(&mut platter, path, 0, b"aaaa");
        platter.apply(&Op::Sync(path.to_owned()));
        write(&mut platter, path, 4, b"bbbb");
        write(&mut platter, path, 8, b"cccc");
        assert_eq!(platter.contents(path).unwrap(), b"aaaabbbbcccc");
        let dropped = platter.cut(Cut::DropUnsynced, &mut |_| 0);
        assert_eq!(dropped.contents(path).unwrap(), b"aaaa");
        let one = platter.cut(Cut::KeepPrefix, &mut |_| 1);
        assert_eq!(one.contents(path).unwrap(), b"aaaabbbb");
        let all = platter.cut(Cut::KeepPrefix, &mut |n| n - 1);
        assert_eq!(all.contents(path).unwrap(), b"aaaabbbbcccc");
    }

    #[test]
    fn a_file_whose_directory_was_never_synced_is_lost() {
        let path = Path::new("/d/f");
        let mut platter = Platter::default();
        platter.apply(&Op::Create(path.to_owned()));
        write(&mut platter, path, 0, b"aaaa");
        platter.apply(&Op::Sync(path.to_owned()));
        assert!(
            platter
                .cut(Cut::DropUnsynced, &mut |_| 0)
                .contents(path)
                .is_none()
        );
    }

    #[test]
    fn a_torn_write_keeps_whole_leading_sectors_only() {
        let bytes = vec![7; 3 * SECTOR as usize];
        // Starting mid-sector: boundaries at 512, 1024, 1536 inside the write.
        let at = 100;
        for pick in 0..3 {
            let Change::Write {
                at: from,
                bytes: kept,
            } = torn(at, &bytes, &mut |_| pick)
            else {
                panic!("a write");
            };
            assert_eq!(from, at);
            assert_eq!((at + kept.len() as u64) % SECTOR, 0);
            assert!(kept.len() < bytes.len());
        }
        let Change::Write { bytes: kept, .. } = torn(0, &[1; 10], &mut |_| 0) else {
            panic!("a write");
        };
        assert!(
            kept.is_empty(),
            "a write inside one sector is all or nothing"
        );
    }

    #[test]
    fn a_failed_sync_keeps_its_changes_from_the_platter() {
        let path = Path::new("/d/f");
        let mut platter = Platter::default();
        platter.apply(&Op::Create(path.to_owned()));
        platter.apply(&Op::SyncDir(PathBuf::from("/d")));
        write(&mut platter, path, 0, b"aaaa");
        platter.apply(&Op::SyncFailed(path.to_owned()));
        platter.apply(&Op::Sync(path.to_owned()));
        assert_eq!(
            platter.contents(path).unwrap(),
            b"aaaa",
            "reads still see them"
        );
        let cut = platter.cut(Cut::KeepPrefix, &mut |n| n - 1);
        assert_eq!(cut.contents(path).unwrap(), b"");
    }
}
