//! Durability: the broker's side of `session-store`'s storage engines.
//!
//! Each shard collects the [`SessionWrite`]s of a reactor turn and hands them, as one
//! [`StoreBatch`] with a ticket, to the store thread (`writer.rs`) without waiting. The thread
//! commits every batch waiting at once (group commit), syncs, then publishes per shard the
//! highest ticket now durable and wakes the shard, which sends the acknowledgements that waited
//! for it (`shard/durable.rs`). A shard that routed QoS 1/2 copies to another shard also waits
//! for that shard to confirm, through its own committed batch, that the copies it enqueued are
//! durable (`confirmed`). At start-up `recovery.rs` loads what the engine kept and deals it to
//! the shards.

mod convert;
mod recovery;
mod stored_keys;
mod writer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Mutex, OnceLock};

use codec::MqttStr;
use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use ring_runtime::{RuntimeControl, ShardId};
use session_store::storage::{SessionWrite, StoredMessage};

pub use convert::{
    instant_to_system, message_from_stored, outgoing_from_stored, stored_delayed_message,
    stored_message, stored_retained, stored_session_of, system_to_instant,
};
pub use recovery::{
    Opened, RecoveredSession, Recovery, ReplicaSeed, StoreOpenError, open_and_recover,
};
pub use stored_keys::stored_keys;
pub use writer::StoreThread;

/// Batches waiting for the store thread, at most (a shard whose batch finds the channel full
/// keeps it and retries next turn; its acknowledgements wait meanwhile).
pub const CHANNEL_BATCHES: usize = 4096;

/// What a shard asks of the store thread, handled in the order sent.
#[derive(Debug)]
pub enum StoreJob {
    /// Commit a turn's writes.
    Batch(StoreBatch),
    /// Read back part of a session's on-disk queue (after every batch sent before it).
    Read(QueueRead),
}

/// A request for the next messages of a session's on-disk queue.
#[derive(Debug)]
pub struct QueueRead {
    /// The shard that wants them (the result goes to it).
    pub shard: ShardId,
    /// The request's number (the session's `SpilledQueue::reading`).
    pub id: u64,
    pub client_id: MqttStr,
    /// Messages with a sequence number above this one.
    pub after: u64,
    pub limit: usize,
}

/// What a [`QueueRead`] found.
#[derive(Debug)]
pub struct QueueReadDone {
    pub id: u64,
    pub client_id: MqttStr,
    /// The messages in sequence order (fewer than the limit: the disk has no more).
    pub messages: Vec<(u64, StoredMessage)>,
    pub limit: usize,
}

/// One shard's writes of one reactor turn.
#[derive(Debug)]
pub struct StoreBatch {
    /// The shard that wrote them.
    pub shard: ShardId,
    /// Its ticket: increasing per shard, one per batch.
    pub ticket: u64,
    /// The writes, in the order they happened.
    pub writes: Vec<SessionWrite>,
    /// For each origin shard whose deliveries this shard handled this turn, the origin's ticket
    /// they carried: once this batch is durable, those copies are.
    pub confirms: Vec<(ShardId, u64)>,
}

/// Emptied write buffers kept per shard for its next batches.
const SPARE_BUFFERS: usize = 4;
/// The largest write buffer kept (bigger ones, left by a burst, are freed), and the most a
/// shard makes room for in a fresh one.
pub(crate) const SPARE_BUFFER_WRITES: usize = 8_192;

/// What the store thread publishes to the shards.
pub struct StoreState {
    shards: usize,
    /// Per shard: the highest ticket whose batch is durable.
    durable: Box<[CachePadded<AtomicU64>]>,
    /// `[origin * shards + shard]`: the highest ticket of `origin` whose deliveries `shard` has
    /// made durable.
    confirmed: Box<[AtomicU64]>,
    /// Wakes shards (set once the runtime runs).
    control: OnceLock<RuntimeControl>,
    /// Why the store failed, if it did (the broker then stops).
    failure: OnceLock<String>,
    /// The sender shards clone theirs from (taken away once every shard has one, so the store
    /// thread ends when the last shard does).
    sender: Mutex<Option<SyncSender<StoreJob>>>,
    /// Per shard: queue reads done, waiting for the shard to take them.
    reads: Box<[Mutex<Vec<QueueReadDone>>]>,
    /// Per shard: emptied write buffers of committed batches, for its next turns (a fresh
    /// buffer per turn grows step by step into freshly faulted memory).
    spare_writes: Box<[ArrayQueue<Vec<SessionWrite>>]>,
    /// Writes the engine skipped as not following the stored state.
    pub skipped_writes: AtomicU64,
    /// Group commits done.
    pub commits: AtomicU64,
    /// How long each group commit took (written by the store thread only).
    pub commit_latency: crate::metrics::Histogram,
}

impl std::fmt::Debug for StoreState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreState")
            .field("shards", &self.shards)
            .finish_non_exhaustive()
    }
}

impl StoreState {
    /// State for `shards` shards whose batches go to `sender` (`None`: nothing is stored).
    pub fn new(shards: usize, sender: Option<SyncSender<StoreJob>>) -> Self {
        Self {
            shards,
            durable: (0..shards)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            confirmed: (0..shards * shards).map(|_| AtomicU64::new(0)).collect(),
            control: OnceLock::new(),
            failure: OnceLock::new(),
            sender: Mutex::new(sender),
            reads: (0..shards).map(|_| Mutex::new(Vec::new())).collect(),
            spare_writes: (0..shards)
                .map(|_| ArrayQueue::new(SPARE_BUFFERS))
                .collect(),
            skipped_writes: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_latency: crate::metrics::Histogram::default(),
        }
    }

    /// A sender for one shard (`None` when nothing is stored).
    pub fn sender(&self) -> Option<SyncSender<StoreJob>> {
        self.sender.lock().ok()?.clone()
    }

    /// Drops the original sender: from now on the shards hold the only ones.
    pub fn close_original_sender(&self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
    }

    /// Lets the store thread wake shards.
    pub fn set_control(&self, control: RuntimeControl) {
        let _ = self.control.set(control);
    }

    /// The highest ticket of `shard` that is durable.
    pub fn durable(&self, shard: ShardId) -> u64 {
        self.durable[shard.index()].load(Ordering::Acquire)
    }

    /// The highest ticket of `origin` whose copies `shard` made durable.
    pub fn confirmed(&self, origin: ShardId, shard: ShardId) -> u64 {
        self.confirmed[origin.index() * self.shards + shard.index()].load(Ordering::Acquire)
    }

    /// Why the store failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// The queue reads done for `shard` since it last asked.
    pub fn take_reads(&self, shard: ShardId) -> Vec<QueueReadDone> {
        match self.reads[shard.index()].lock() {
            Ok(mut reads) if !reads.is_empty() => std::mem::take(&mut *reads),
            _ => Vec::new(),
        }
    }

    /// An emptied write buffer for `shard`'s next batch, if one is spare.
    pub fn spare_writes(&self, shard: ShardId) -> Option<Vec<SessionWrite>> {
        self.spare_writes[shard.index()].pop()
    }

    /// Gives `shard` back the emptied buffer of one of its committed batches (kept only while
    /// at most `SPARE_BUFFERS` wait and if it holds at most `SPARE_BUFFER_WRITES`).
    fn recycle_writes(&self, shard: ShardId, mut writes: Vec<SessionWrite>) {
        writes.clear();
        if writes.capacity() > 0 && writes.capacity() <= SPARE_BUFFER_WRITES {
            let _ = self.spare_writes[shard.index()].push(writes);
        }
    }

    /// Hands a read's result to its shard and wakes it.
    fn deliver_read(&self, shard: ShardId, done: QueueReadDone) {
        if let Ok(mut reads) = self.reads[shard.index()].lock() {
            reads.push(done);
        }
        if let Some(control) = self.control.get() {
            control.wake(shard);
        }
    }

    /// Publishes what a group commit made durable and wakes the shards it concerns.
    fn publish(&self, batches: &[StoreBatch]) {
        let mut woken = vec![false; self.shards];
        for batch in batches {
            self.durable[batch.shard.index()].fetch_max(batch.ticket, Ordering::AcqRel);
            woken[batch.shard.index()] = true;
            for (origin, ticket) in &batch.confirms {
                let slot = origin.index() * self.shards + batch.shard.index();
                self.confirmed[slot].fetch_max(*ticket, Ordering::AcqRel);
                woken[origin.index()] = true;
            }
        }
        let Some(control) = self.control.get() else {
            return;
        };
        for (index, wake) in woken.into_iter().enumerate() {
            if wake {
                control.wake(ShardId::new(index as u16));
            }
        }
    }

    /// The store failed: remember why and stop the broker (acknowledgements can no longer be
    /// made durable, so none is sent).
    fn fail(&self, reason: String) {
        tracing::error!(
            "persistence failed: {reason}; stopping the broker (acknowledgements wait for the \
             disk, and it refuses writes)"
        );
        let _ = self.failure.set(reason);
        if let Some(control) = self.control.get() {
            control.shutdown();
        }
    }
}
