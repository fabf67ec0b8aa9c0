//! Telling damage from a torn tail. Replay reads an epoch's records from the start of its file
//! until one is not an intact record of that epoch. What lies there is one of:
//! - the end: zeros (the file as created) or an intact record of an older epoch (the file is
//!   reused from its start);
//! - a torn tail: the last record, cut by a crash before its sync returned (so never
//!   acknowledged), with no intact record of the epoch after it;
//! - damage: a record that fails its check with intact records of the same epoch after it
//!   (a flipped bit, a bad sector, an overwrite). Replaying up to it would silently drop every
//!   record after it, acknowledged ones included, and the next checkpoint would make that
//!   permanent; so opening refuses, naming the file, the offset and what would be lost.
//!
//! Intact records after a bad one are found by scanning every byte offset for a header whose
//! epoch is the one wanted and whose checksum holds (a CRC-32 over the epoch and body: a
//! random match is one in 2^32 per candidate that already carries the right epoch).

use std::path::Path;

use super::file::LogFile;
use super::record;
use crate::storage::StorageError;
use crate::storage::salvage::files as salvage;

/// Bytes read at a time while scanning.
const SCAN_CHUNK: usize = 1 << 20;

/// What lies where an epoch's replay stopped.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// Zeros, an older epoch's record, or the file's end.
    End,
    /// Something that is not an intact record, with no intact record of the epoch after it.
    TornTail { at: u64 },
}

/// Intact records of one epoch found after a bad one.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Survivors {
    /// Where the first of them starts.
    pub(super) first: u64,
    /// How many follow one another from there.
    pub(super) records: u64,
    /// Their bytes.
    pub(super) bytes: u64,
}

/// Judges what lies at `at`, where replaying `epoch` from `file` stopped: `Err` (corrupt)
/// when intact records of `epoch` follow it.
pub(super) fn judge_stop(file: &LogFile, at: u64, epoch: u64) -> Result<Stop, StorageError> {
    if is_clean_end(file, at, epoch)? {
        return Ok(Stop::End);
    }
    if let Some(found) = survivors(file, at + 1, |e| e == epoch)? {
        return Err(damaged(file.path(), at, epoch, &found));
    }
    // A header of this epoch over a record that is not intact: the last write, cut. Anything
    // else is what an older epoch left in the reused file around this epoch's end.
    let torn = header_epoch(file, at)? == Some(epoch);
    Ok(if torn {
        Stop::TornTail { at }
    } else {
        Stop::End
    })
}

/// The epoch field of the header at `at`, if the file holds a header there.
pub(super) fn header_epoch(file: &LogFile, at: u64) -> Result<Option<u64>, StorageError> {
    let header = file.read_at(at, record::HEADER)?;
    Ok(header.map(|h| u64::from_be_bytes(h[8..16].try_into().expect("invariant: 8 bytes"))))
}

/// Whether `file`, whose first record is not intact, still holds intact records of an epoch
/// after `checkpointed` (its start is then damaged: `Err`).
pub(super) fn judge_bad_start(file: &LogFile, checkpointed: u64) -> Result<(), StorageError> {
    if is_clean_end(file, file.start, u64::MAX)? {
        return Ok(());
    }
    match survivors(file, file.start + 1, |e| e > checkpointed)? {
        Some(found) => {
            let epoch = file
                .read_record(found.first)?
                .as_deref()
                .and_then(record::read)
                .map_or(0, |r| r.epoch);
            Err(damaged(file.path(), file.start, epoch, &found))
        }
        None => Ok(()),
    }
}

/// Zeros at `at` (a header of zeros: nothing was ever written there), the file's end, or an
/// intact record of an epoch before `epoch`.
pub(super) fn is_clean_end(file: &LogFile, at: u64, epoch: u64) -> Result<bool, StorageError> {
    let Some(header) = file.read_at(at, record::HEADER)? else {
        return Ok(true);
    };
    if header.iter().all(|&b| b == 0) {
        return Ok(true);
    }
    let older = file
        .read_record(at)?
        .as_deref()
        .and_then(record::read)
        .is_some_and(|r| r.epoch < epoch);
    Ok(older)
}

/// The first intact record at or after `from` whose epoch `wanted` accepts, and the run of
/// intact records of that epoch from it.
fn survivors(
    file: &LogFile,
    from: u64,
    wanted: impl Fn(u64) -> bool,
) -> Result<Option<Survivors>, StorageError> {
    let Some((first, epoch)) = first_intact(file, from, &wanted)? else {
        return Ok(None);
    };
    let (mut records, mut at) = (0, first);
    while let Some(bytes) = file.read_record(at)? {
        if record::read(&bytes).is_none_or(|r| r.epoch != epoch) {
            break;
        }
        records += 1;
        at += bytes.len() as u64;
    }
    Ok(Some(Survivors {
        first,
        records,
        bytes: at - first,
    }))
}

/// The offset and epoch of the first intact record at or after `from` whose epoch `wanted`
/// accepts: the epoch field is compared first, the checksum only where it matches.
pub(super) fn first_intact(
    file: &LogFile,
    from: u64,
    wanted: &impl Fn(u64) -> bool,
) -> Result<Option<(u64, u64)>, StorageError> {
    let len = file.len()?;
    let mut start = from;
    while start + (record::HEADER as u64) <= len {
        let take = (len - start).min((SCAN_CHUNK + record::HEADER) as u64) as usize;
        let Some(chunk) = file.read_at(start, take)? else {
            return Ok(None);
        };
        for offset in 0..=chunk.len() - record::HEADER {
            let field: [u8; 8] = chunk[offset + 8..offset + 16]
                .try_into()
                .expect("invariant: an 8-byte slice");
            let epoch = u64::from_be_bytes(field);
            if epoch == 0 || !wanted(epoch) {
                continue;
            }
            let at = start + offset as u64;
            let intact = file
                .read_record(at)?
                .as_deref()
                .and_then(record::read)
                .is_some_and(|r| r.epoch == epoch);
            if intact {
                return Ok(Some((at, epoch)));
            }
        }
        start += (chunk.len() - record::HEADER + 1) as u64;
    }
    Ok(None)
}

/// The refusal to open a damaged log.
fn damaged(path: &Path, at: u64, epoch: u64, found: &Survivors) -> StorageError {
    StorageError::Corrupt {
        reason: format!(
            "{} is damaged at byte {at}: the record there fails its checksum, yet {} intact \
             record(s) of epoch {epoch} ({} bytes) follow it from byte {}; replaying up to the \
             damage would silently lose them, so the store was not opened and nothing in it was \
             changed. Keep a copy of the directory; `{}` reports what is intact, and `{}` \
             copies every intact record, before and after the damage, into a new store; or \
             restore the directory from a backup",
            path.display(),
            found.records,
            found.bytes,
            found.first,
            salvage::check_command(path),
            salvage::salvage_command(path)
        ),
    }
}
