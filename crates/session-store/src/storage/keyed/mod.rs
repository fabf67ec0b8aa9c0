//! What the durable engines share: the key layout (`keys.rs`), reading the store back and the
//! in-memory index built on the way (`load.rs`, `index.rs`), and turning a batch into key
//! writes from that index (`plan.rs`, over the batch's own planned writes, `overlay.rs`). An
//! engine supplies reads ([`KvRead`]) and applies the resulting [`KeyWrite`]s in one atomic
//! step; [`Keyed`] holds the index between calls.
//!
//! # Key layout
//!
//! A session key is a tag byte, the client identifier with a two-byte big-endian length prefix
//! (so no identifier is a prefix of another's keys), and a suffix:
//!
//! | key | value |
//! |---|---|
//! | `s` `<len><client id>` | the session record: connection-scoped state, subscriptions (in order) |
//! | `p` `<len><client id>` | the session's inbound QoS 2 ids awaiting PUBREL, in order (none: no key) |
//! | `a` `<len><client id>` `<packet id: u16 BE>` | the older layout of one inbound QoS 2 id (empty value): still read, deleted when the session's ids are next written |
//! | `q` `<len><client id>` `<seq: u64 BE>` | a queued message (keys sort in queue order) |
//! | `i` `<len><client id>` `<packet id: u16 BE>` | an inflight entry: its send number, state and (awaiting PUBACK or PUBREC) message |
//! | `t` `<topic>` | a retained message (no length prefix: the topic is the rest of the key) |
//! | `d` `<id: u64 BE>` | a delayed message (`$delayed/`): when due, its publisher, the message |
//!
//! Subscriptions live in the record: they are small and their order matters. A session's
//! inbound QoS 2 ids change with every QoS 2 message it publishes, so they have a key of their
//! own, written once per batch however many of them changed (one id per key, the older
//! layout, made two key writes per message).
//! `InflightSent` moves the message from its `q` key into the `i` key, so the `q` keys are
//! exactly the queue (a sequence number the broker reuses once its queue emptied cannot meet an
//! older message). A message queued and sent in one batch is written once, under `i`
//! (`MessageSent` plans only that key).
//! Inflight entries load in send order: each carries an engine-wide send number, increasing,
//! given at `InflightSent` (so the order holds whatever the sequence numbers are).
//!
//! # Cost of a commit
//!
//! Independent of how much a session stores: see `plan.rs` for the few reads it makes. The
//! index (`index.rs`) keeps records, queue lengths and inflight entries in memory, never queued
//! messages. It is built by `load` (a full scan), or by the first `commit` if `load` was not
//! called, and dropped (to be rebuilt) when a commit fails, since it may then be ahead of the
//! store.

mod hash_filter;
mod index;
mod keys;
mod kv;
mod load;
mod overlay;
mod plan;
#[cfg(test)]
mod tests;

pub(super) use keys::{AWAITING, AWAITING_IDS, INFLIGHT, QUEUED, RETAINED, SESSION, split_client};
pub(super) use keys::{DELAYED, client_id, delayed_id_of, topic_of};
#[cfg(test)]
pub(super) use keys::{inflight_key, prefix, queued_key, session_key};
pub(super) use kv::{KeyWrite, KvRead, Visit, prefix_end};
pub(super) use load::queued_after;

use index::Index;
use overlay::PlannedWrites;

use super::{Committed, PagedRecovered, SessionWrite, StorageError};

/// The shared state of a durable engine: the index of what it stores, once built, and the
/// room a batch is planned in (kept between batches).
#[derive(Debug, Default)]
pub(super) struct Keyed {
    index: Option<Index>,
    planned: PlannedWrites,
}

impl Keyed {
    /// Every stored session (each queue cut to its first `queued` messages) and retained
    /// message; (re)builds the index.
    pub(super) fn load(
        &mut self,
        kv: &impl KvRead,
        queued: usize,
    ) -> Result<PagedRecovered, StorageError> {
        self.index = None;
        let (paged, index) = load::load_all(kv, queued)?;
        self.index = Some(index);
        Ok(paged)
    }

    /// Adds the key writes of `batch` to `writes` (in no particular order); what was skipped.
    /// Builds the index first if there is none. The engine must apply the writes, or call
    /// [`Keyed::forget`] if it cannot.
    pub(super) fn plan(
        &mut self,
        kv: &impl KvRead,
        batch: &[SessionWrite],
        writes: &mut Vec<KeyWrite>,
    ) -> Result<Committed, StorageError> {
        let index = match &mut self.index {
            Some(index) => index,
            None => self.index.insert(load::load_all(kv, 0)?.1),
        };
        let planned = plan::plan(kv, index, &mut self.planned, batch, writes);
        if planned.is_err() {
            self.forget();
        }
        planned
    }

    /// Drops the index (the planned writes were not applied): the next call rebuilds it.
    pub(super) fn forget(&mut self) {
        self.index = None;
    }
}
