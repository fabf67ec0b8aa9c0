//! Reads through the log's epochs to the B-tree: the epoch being written, then the one being
//! checkpointed, then the B-tree as last checkpointed. Scans merge the three in key order.

use std::collections::BTreeMap;
use std::iter::Peekable;

use super::pending::Pending;
use crate::storage::StorageError;
use crate::storage::keyed::{KvRead, Visit};

/// The store as the log's epochs and the B-tree below them add up to.
pub(super) struct Layered<'a, B> {
    /// Newest first.
    pub(super) epochs: [Option<&'a Pending>; 2],
    pub(super) base: B,
}

impl<B: KvRead> Layered<'_, B> {
    /// What the epochs say of `key`, newest first (`Some(None)`: deleted).
    fn logged(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        (self.epochs.iter().flatten()).find_map(|epoch| epoch.get(key))
    }

    /// The epochs' keys starting with `prefix` from `start` on, the newest write of each, in
    /// key order.
    fn logged_under(&self, prefix: &[u8], start: &[u8]) -> Vec<(Vec<u8>, Option<&[u8]>)> {
        match self.epochs {
            [Some(only), None] | [None, Some(only)] => only.under(prefix, start),
            [None, None] => Vec::new(),
            [Some(newer), Some(older)] => {
                let mut merged: BTreeMap<_, _> = older.under(prefix, start).into_iter().collect();
                merged.extend(newer.under(prefix, start));
                merged.into_iter().collect()
            }
        }
    }
}

impl<B: KvRead> KvRead for Layered<'_, B> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        match self.logged(key) {
            Some(value) => Ok(value.map(<[u8]>::to_vec)),
            None => self.base.get(key),
        }
    }

    fn contains(&self, key: &[u8]) -> Result<bool, StorageError> {
        match self.logged(key) {
            Some(value) => Ok(value.is_some()),
            None => self.base.contains(key),
        }
    }

    fn scan(&self, start: &[u8], prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        let logged = self.logged_under(prefix, start.max(prefix));
        let mut merge = Merge::new(logged.iter().map(as_slices), Ascending, visit);
        self.base
            .scan(start, prefix, &mut |key, value| merge.base(key, value))?;
        merge.rest()
    }

    fn scan_back(&self, prefix: &[u8], visit: Visit<'_>) -> Result<(), StorageError> {
        let logged = self.logged_under(prefix, prefix);
        let mut merge = Merge::new(logged.iter().rev().map(as_slices), Descending, visit);
        self.base
            .scan_back(prefix, &mut |key, value| merge.base(key, value))?;
        merge.rest()
    }
}

fn as_slices<'a>((key, value): &'a (Vec<u8>, Option<&'a [u8]>)) -> (&'a [u8], Option<&'a [u8]>) {
    (key.as_slice(), *value)
}

/// Which way a scan goes.
trait Direction {
    /// Whether `logged` comes before `base` in this direction.
    fn before(logged: &[u8], base: &[u8]) -> bool;
}

struct Ascending;
struct Descending;

impl Direction for Ascending {
    fn before(logged: &[u8], base: &[u8]) -> bool {
        logged < base
    }
}

impl Direction for Descending {
    fn before(logged: &[u8], base: &[u8]) -> bool {
        logged > base
    }
}

/// A scan of the B-tree merged with the epochs' writes in the same range and direction: a key
/// the epochs wrote is visited with their value (or not at all, if they deleted it).
struct Merge<'v, 'l, I: Iterator<Item = (&'l [u8], Option<&'l [u8]>)>, D> {
    logged: Peekable<I>,
    visit: Visit<'v>,
    /// The visitor asked to stop.
    stopped: bool,
    _direction: D,
}

impl<'v, 'l, I: Iterator<Item = (&'l [u8], Option<&'l [u8]>)>, D: Direction> Merge<'v, 'l, I, D> {
    fn new(logged: I, direction: D, visit: Visit<'v>) -> Self {
        Self {
            logged: logged.peekable(),
            visit,
            stopped: false,
            _direction: direction,
        }
    }

    /// Visits the logged keys before `key`, then `key` as logged or as the B-tree has it.
    fn base(&mut self, key: &[u8], value: &[u8]) -> Result<bool, StorageError> {
        while let Some((logged, _)) = self.logged.peek() {
            if !D::before(logged, key) {
                break;
            }
            if !self.next_logged()? {
                return Ok(false);
            }
        }
        let go_on = match self.logged.next_if(|(logged, _)| *logged == key) {
            Some((_, Some(newer))) => (self.visit)(key, newer)?,
            Some((_, None)) => true,
            None => (self.visit)(key, value)?,
        };
        self.stopped = !go_on;
        Ok(go_on)
    }

    /// Visits the next logged key (unless deleted); `false` once the visitor stops.
    fn next_logged(&mut self) -> Result<bool, StorageError> {
        if let Some((key, Some(value))) = self.logged.next() {
            self.stopped = !(self.visit)(key, value)?;
        }
        Ok(!self.stopped)
    }

    /// Visits the logged keys after the B-tree's last.
    fn rest(mut self) -> Result<(), StorageError> {
        while !self.stopped && self.logged.peek().is_some() {
            self.next_logged()?;
        }
        Ok(())
    }
}
