//! Session persistence behind one small trait, [`SessionStorage`]: an engine applies batches
//! of [`SessionWrite`]s and gives back what they add up to ([`Recovered`]) after a restart.
//! Engines: [`NoStorage`] (memory only, the default); [`RecordingStorage`], the in-memory model
//! every durable engine must agree with; and the durable engines [`SledStorage`] (sled, the
//! design's engine) and [`RedbStorage`] (redb, the measured alternative). Their types never leave
//! this crate: both open a directory and report failures as [`StorageError`].
//!
//! The durable engines share a key layout and a planning step (`keyed.rs`): a batch is applied
//! with the model's own rules to the sessions it names, so every engine skips the same writes
//! (reported as [`Skipped`]), and only the keys that changed are written, in one atomic step (a
//! sled `Batch`; one redb write transaction). They open with a [`SyncMode`]: durable at every
//! commit (sled `flush`; redb `Durability::Immediate`), or deferred to [`SessionStorage::sync`]. Values use a small
//! versioned binary format (`encoding.rs`); one that does not decode is [`StorageError::Corrupt`]
//! naming its key. The contract is one generic test suite (`contract_tests.rs`) that every engine
//! runs (`engine_tests.rs`), the durable ones also across a reopen.
//!
//! # Contract
//!
//! - `commit` applies a batch atomically and in order: after a crash, `load` returns the state
//!   of every batch whose `commit` returned `Ok` (with [`SyncMode::Deferred`]: up to the last
//!   `sync` that returned `Ok`, and possibly later whole batches), and nothing of a batch whose
//!   `commit` did not.
//! - Session writes name sessions by client identifier. `SessionSaved` creates a session; every
//!   other write but `SessionRemoved` needs the session to exist, `InflightSent` and
//!   `MessageDropped` need the queued message (`InflightSent` a QoS 1/2 one, its packet id not
//!   in flight), `MessageQueued` a sequence number above the session's last, `InflightReleased`
//!   an entry awaiting PUBREC, `InflightAcked` an entry, `Qos2Received` an id not yet recorded,
//!   `Qos2Released` a recorded one, `Unsubscribed` the subscription. A write that does not
//!   follow the stored state is skipped and reported in [`Committed::skipped`] (a broker bug or
//!   a benign race, not I/O); the rest of the batch applies.
//! - `RetainSet` and `RetainCleared` name a topic, not a session, and are never skipped.
//! - `load` returns sessions by client identifier; a session's queue in sequence order, its
//!   inflight entries in send order; retained messages by topic.
//!
//! # Where the broker will emit writes
//!
//! Nothing calls this yet. Only persistent sessions (expiry not `OnClose`) are written; the
//! shard collects its writes during a turn and hands them to its store writer at turn end, and
//! QoS 1/2 acknowledgements wait for that commit (`crates/broker-bin/src/shard/`):
//!
//! | write | handler |
//! |---|---|
//! | `SessionSaved` | `connect.rs`: `complete_connect` (new or resumed session: expiry, will, protocol); `close.rs`: `handle_disconnect` (a DISCONNECT changing the expiry) |
//! | `SessionDisconnected` | `close.rs`: `session_disconnected` |
//! | `SessionRemoved` | `connect.rs`: `fresh_session` (Clean Start discards a stored one); `close.rs`: `end_session` (expiry, expiry 0 on close) |
//! | `Subscribed` / `Unsubscribed` | `subscribe.rs`: `subscribe_one` / `unsubscribe_one` |
//! | `MessageQueued` | `deliver.rs`: `enqueue` (every QoS 1/2 copy, before it may be sent) |
//! | `MessageDropped` | `deliver.rs`: `enqueue` (drop-oldest at a bound), `send_next` (expired), `redistribute_shared` |
//! | `InflightSent` | `deliver.rs`: `send_next` (popped from the queue, admitted to the window) |
//! | `InflightReleased` | `acks.rs`: `handle_pubrec` |
//! | `InflightAcked` | `acks.rs`: `handle_puback`, `handle_pubcomp`; `deliver.rs`/`acks.rs` where an entry is abandoned |
//! | `Qos2Received` / `Qos2Released` | `publish.rs`: `handle_publish` (QoS 2 recorded) / `acks.rs`: `handle_pubrel` |
//!
//! Session moves between shards (`takeover.rs`) write nothing: the owner is not durable, the
//! state is keyed by client identifier. `MessageQueued` needs a per-session sequence number
//! ([`MessageSeq`]) that the broker's queue entries do not carry yet.

mod committed;
mod encoding;
mod keyed;
mod none;
mod recording;
mod redb;
mod sled;
mod write;

#[cfg(test)]
mod contract_tests;
#[cfg(test)]
mod engine_tests;

pub use self::redb::RedbStorage;
pub use self::sled::SledStorage;
pub use committed::{Committed, Skipped, SyncMode};
pub use none::NoStorage;
pub use recording::RecordingStorage;
pub use write::{
    MessageSeq, Recovered, SessionWrite, StoredMessage, StoredSession, StoredSubscription,
};

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
}
