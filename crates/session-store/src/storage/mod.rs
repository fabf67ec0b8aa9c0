//! Session persistence behind one small trait, [`SessionStorage`]: an engine applies batches
//! of [`SessionWrite`]s and gives back what they add up to ([`Recovered`]) after a restart.
//! Engines: [`NoStorage`] (memory only, the broker's `engine = "none"`); [`RecordingStorage`],
//! the in-memory model every durable engine must agree with; and the durable engines
//! [`SledStorage`] (sled, the design's engine), [`RedbStorage`] (redb, the measured alternative)
//! and [`LoggedStorage`] (group commits appended to a log, their net effect checkpointed into
//! redb in the background; the broker's default, `engine = "log"`). Their types never leave this
//! crate: each opens a directory and reports failures as [`StorageError`].
//!
//! The durable engines share a key layout, an in-memory index and a planning step (`keyed/`):
//! each engine keeps, per stored session, its record, its queue's length and its inflight
//! entries in memory (never a queued message), so a batch becomes direct key writes with the
//! model's own rules (every engine skips the same writes, reported as [`Skipped`]) and a commit
//! costs the same whatever a session has queued; the writes go in one atomic step (a sled
//! `Batch`; one redb write transaction; one log record). They open with a [`SyncMode`]: durable at every commit
//! (sled `flush`; redb `Durability::Immediate`), or deferred to [`SessionStorage::sync`]. Values
//! use a small versioned binary format (`encoding.rs`); one that does not decode, or an entry
//! of no stored session, is [`StorageError::Corrupt`] naming its key. The contract is one
//! generic test suite (`contract_tests.rs`) that every engine runs (`engine_tests.rs`), the
//! durable ones also across a reopen and in both sync modes, and a comparison of the durable
//! engines with the model over random write sequences with reopens (`model_tests.rs`).
//!
//! The log and redb engines reach their files through a seam (`disk/`): the file system in
//! the broker, a simulated disk in tests that cuts the power after any write or sync, keeping
//! none, a prefix or a torn part of what was not synced (`power_cut_tests.rs`: every commit
//! that returned survives, nothing else appears), and fails writes and syncs or shortens them
//! (`fault_tests.rs`). sled has no such seam: its crash tests kill the broker instead.
//!
//! # Contract
//!
//! - `load` (or `load_paged`) comes first: a durable engine builds its index there. A `commit`
//!   before any load builds it too (a full scan, as `load`), so it is correct, not free.
//! - `commit` applies a batch atomically and in order: after a crash, `load` returns the state
//!   of every batch whose `commit` returned `Ok` (with [`SyncMode::Deferred`]: up to the last
//!   `sync` that returned `Ok`, and possibly later whole batches), and nothing of a batch whose
//!   `commit` did not.
//! - Session writes name sessions by client identifier. `SessionSaved` creates a session; every
//!   other write but `SessionRemoved` needs the session to exist, `InflightSent` and
//!   `MessageDropped` need the queued message (`InflightSent` a QoS 1/2 one, its packet id not
//!   in flight), `MessageQueued` a sequence number above every one queued now (any, once the
//!   queue is empty: sent messages no longer hold theirs), `MessageSent` what `MessageQueued`
//!   and then `InflightSent` need, `InflightReleased` an entry awaiting
//!   PUBREC, `InflightAcked` an entry, `Qos2Received` an id not yet recorded, `Qos2Released` a
//!   recorded one, `Unsubscribed` the subscription. A write that does not follow the stored
//!   state is skipped and reported in [`Committed::skipped`] (a broker bug or a benign race,
//!   not I/O); the rest of the batch applies.
//! - `RetainSet` and `RetainCleared` name a topic, not a session, and are never skipped; nor
//!   are `DelayedSet` and `DelayedCleared`, which name a delayed message by id.
//! - `load` returns sessions by client identifier; a session's queue in sequence order; its
//!   inflight entries in the order of their `InflightSent` writes (send order, kept across
//!   restarts, whatever the sequence numbers); its inbound QoS 2 ids in packet id order;
//!   retained messages by topic; delayed messages by id.
//! - `load_paged(n)` returns the same with each queue cut to its first `n` messages and every
//!   queue's whole length; `queued_after` pages through the rest, in sequence order.
//!
//! # Where the broker emits writes
//!
//! Only persistent sessions (expiry not `OnClose`) are written; the shard collects its writes
//! during a turn and hands them to the store thread at turn end, and QoS 1/2 acknowledgements
//! wait for that commit (`crates/broker-core/src/shard/durable.rs`,
//! `crates/broker-core/src/store/`):
//!
//! | write | handler |
//! |---|---|
//! | `SessionSaved` | `connect.rs`: `record_connected` (new or resumed session: expiry, will, protocol, and the owner, the identity of the CONNECT; with its subscriptions when it was not stored before); `close.rs`: `record_disconnected` (the will as it stands, the owner the session directory names); `ownership.rs`: `record_imported` (a session another node released) |
//! | `SessionDisconnected` | `close.rs`: `record_disconnected` (connection closed; a delayed will published) |
//! | `SessionRemoved` | `close.rs`: `end_session_state` (expiry, Clean Start, expiry 0 on close), `handle_disconnect` (a DISCONNECT setting expiry 0); `connect.rs`: `record_connected` (reconnected with expiry 0) |
//! | `Subscribed` / `Unsubscribed` | `subscribe.rs`: `subscribe_one` / `unsubscribe_one` |
//! | `MessageQueued` | `deliver.rs`: `enqueue` (every QoS 1/2 copy, before it may be sent; `spill.rs`: `enqueue_on_disk` beyond the memory bound) |
//! | `MessageDropped` | `deliver.rs`: `enqueue` (drop-oldest at a bound), `redistribute_shared`; `spill.rs` |
//! | `InflightSent` | `deliver.rs`: `send_next` (popped from the queue, admitted to the window) |
//! | `MessageSent` | `durable.rs`: `record` (an `InflightSent` of the copy the turn's last write queued replaces that `MessageQueued`: the same state in one write) |
//! | `InflightReleased` | `acks.rs`: `handle_pubrec` |
//! | `InflightAcked` | `acks.rs`: `handle_puback`, `handle_pubcomp`; `deliver.rs`/`acks.rs` where an entry is abandoned |
//! | `Qos2Received` / `Qos2Released` | `publish.rs`: `handle_publish` (QoS 2 recorded) / `acks.rs`: `handle_pubrel` |
//! | `RetainSet` / `RetainCleared` | `publish.rs`: `retain` (a RETAIN publish sets or, with an empty payload, clears) |
//! | `DelayedSet` / `DelayedCleared` | `delayed.rs`: `delay_publish` / `take_delayed` (a `$delayed/` message fired or cancelled) |
//!
//! Session moves between shards (`takeover.rs`) write nothing: the shard holding a session is
//! not durable, the state is keyed by client identifier. Sequence numbers come from one broker-wide counter
//! (`Shared::new_seq`), started above `PagedRecovered::max_queued_seq`; a copy carries its own
//! (`Outgoing::seq`).

mod committed;
mod disk;
mod encoding;
mod keyed;
mod logged;
mod none;
mod recording;
mod redb_storage;
mod salvage;
mod sled_storage;
mod snapshot;
mod write;

#[cfg(test)]
mod contract_skip_tests;
#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod contract_writes;
#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod power_cut_tests;
#[cfg(test)]
mod random_writes;

pub use committed::{Committed, Skipped, SyncMode};
pub use logged::{DEFAULT_LOG_BYTES, DEFAULT_MAX_LOG_BYTES, LogSize, LoggedStorage};
pub use none::NoStorage;
pub use recording::RecordingStorage;
pub use redb_storage::RedbStorage;
pub use salvage::{
    StoreCounts, StoreEngine, StoreReport, check_store, detect_engine, salvage_store,
};
pub use sled_storage::SledStorage;
pub use snapshot::{
    SnapshotError, decode_queued_message, decode_session_snapshot, encode_queued_message,
    encode_session_snapshot,
};
pub use write::{
    MessageSeq, PagedRecovered, Recovered, SessionWrite, StoredDelayed, StoredKeys, StoredMessage,
    StoredOwner, StoredSession, StoredSubscription,
};

use codec::MqttStr;

/// Why a storage engine failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The engine failed (I/O, a full disk, a closed database).
    #[error("storage engine {engine}: {reason}")]
    Engine {
        /// The engine's name.
        engine: &'static str,
        /// What it reported.
        reason: String,
    },
    /// Stored data cannot be read back.
    #[error("stored session data is corrupt: {reason}")]
    Corrupt {
        /// What is wrong with it.
        reason: String,
    },
}

/// The page cache a durable engine opened with `open` holds at most (the engines' own
/// defaults are 1 GiB).
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// Where sessions persist. Moved to the broker's store thread, hence `Send`.
pub trait SessionStorage: Send {
    /// Every stored session and retained message, as the committed batches left them.
    fn load(&mut self) -> Result<Recovered, StorageError>;

    /// Applies `batch` atomically and in order. Durable when this returns `Ok` if the engine
    /// was opened with `SyncMode::EveryCommit`; with `SyncMode::Deferred` durable after the
    /// next `sync`. Writes that do not follow the stored state are skipped (each one, not the
    /// batch) and reported in `Committed::skipped`.
    fn commit(&mut self, batch: &[SessionWrite]) -> Result<Committed, StorageError>;

    /// Makes every committed batch durable (a no-op for engines that are durable per commit or
    /// not durable at all).
    fn sync(&mut self) -> Result<(), StorageError>;

    /// Up to `limit` queued messages of `client_id` with seq > `after` (None = from the start),
    /// in seq order. Reads what the committed batches left (a range scan on the durable
    /// engines); nothing for a session not stored. The default reads everything through
    /// `load`: every engine of this crate overrides it.
    fn queued_after(
        &mut self,
        client_id: &MqttStr,
        after: Option<MessageSeq>,
        limit: usize,
    ) -> Result<Vec<(MessageSeq, StoredMessage)>, StorageError> {
        let recovered = self.load()?;
        let session = recovered
            .sessions
            .into_iter()
            .find(|s| s.client_id == *client_id);
        Ok(page(
            session.map(|s| s.queued).unwrap_or_default(),
            after,
            limit,
        ))
    }

    /// [`load`](Self::load), but each session's `queued` holds only its first `queued`
    /// messages (none for 0), with every session's whole queue length beside: the broker loads
    /// the rest with [`queued_after`](Self::queued_after) as it needs them. Like `load`, it
    /// must come before the first `commit` (a durable engine builds its index here). The
    /// default cuts what `load` gives back: every engine of this crate overrides it, so that
    /// the messages beyond the first are not decoded.
    fn load_paged(&mut self, queued: usize) -> Result<PagedRecovered, StorageError> {
        let mut recovered = self.load()?;
        let max_queued_seq = (recovered.sessions.iter())
            .filter_map(|s| s.queued.last().map(|(seq, _)| *seq))
            .max()
            .unwrap_or(0);
        let queued_totals = (recovered.sessions.iter_mut())
            .map(|session| {
                let total = session.queued.len();
                session.queued.truncate(queued);
                total
            })
            .collect();
        Ok(PagedRecovered {
            recovered,
            queued_totals,
            max_queued_seq,
        })
    }
}

/// The messages of `queued` (in sequence order) after `after`, at most `limit`.
pub(crate) fn page(
    queued: Vec<(MessageSeq, StoredMessage)>,
    after: Option<MessageSeq>,
    limit: usize,
) -> Vec<(MessageSeq, StoredMessage)> {
    (queued.into_iter())
        .filter(|(seq, _)| after.is_none_or(|after| *seq > after))
        .take(limit)
        .collect()
}
