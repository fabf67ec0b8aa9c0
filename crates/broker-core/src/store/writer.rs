//! The store thread: group commits of the shards' batches, then the durable watermarks.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use session_store::storage::{SessionStorage, SessionWrite, StorageError};

use super::{QueueRead, QueueReadDone, StoreBatch, StoreJob, StoreState};
use crate::settings::SyncPolicy;

/// Most batches one group commit takes (the rest go in the next).
const MAX_GROUP: usize = 1024;
/// Most skipped writes logged one by one per commit (the rest are only counted).
const SKIPPED_LOGGED: usize = 4;
/// How long after its last commit an idle store thread hands its free memory back (freed
/// pages stay with the allocator for `limits.free_memory_hold_ms` otherwise, and a thread
/// that no longer allocates never purges them).
const IDLE_COLLECT: Duration = Duration::from_secs(1);

/// The running store thread.
#[derive(Debug)]
pub struct StoreThread {
    thread: Option<JoinHandle<()>>,
}

impl StoreThread {
    /// Starts the thread: it commits what arrives on `batches` until every sender is gone.
    pub fn start(
        storage: Box<dyn SessionStorage>,
        batches: Receiver<StoreJob>,
        state: Arc<StoreState>,
        sync: SyncPolicy,
        interval: Duration,
    ) -> std::io::Result<Self> {
        let writer = Writer {
            storage,
            batches,
            state,
            sync,
            interval,
            last_sync: Instant::now(),
            unsynced: false,
            last_commit: Instant::now(),
            collect_pending: false,
            writes: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("ringmq-store".into())
            .spawn(move || writer.run())?;
        Ok(Self {
            thread: Some(thread),
        })
    }

    /// Waits for the thread to commit what is left and end (after the shards ended).
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("the store thread panicked");
        }
    }
}

struct Writer {
    storage: Box<dyn SessionStorage>,
    batches: Receiver<StoreJob>,
    state: Arc<StoreState>,
    sync: SyncPolicy,
    interval: Duration,
    last_sync: Instant,
    /// Commits since the last sync (`interval` policy).
    unsynced: bool,
    /// When the last group commit ended.
    last_commit: Instant,
    /// Committed since free memory was last handed back.
    collect_pending: bool,
    /// A group's writes, in one buffer kept between commits (a group can hold a great many:
    /// allocating it anew each time costs page faults).
    writes: Vec<SessionWrite>,
}

impl Writer {
    fn run(mut self) {
        while let Some(first) = self.next_batch() {
            if let Err(error) = self.handle_waiting(first) {
                self.state.fail(error.to_string());
                return;
            }
        }
        if let Err(error) = self.sync_if_needed(true) {
            self.state.fail(error.to_string());
        }
    }

    /// Handles `first` and every job waiting behind it, in order: consecutive batches as one
    /// group commit, a read after the batches sent before it are committed.
    fn handle_waiting(&mut self, first: StoreJob) -> Result<(), StorageError> {
        let mut group = Vec::new();
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(job) = next {
            taken += 1;
            match job {
                StoreJob::Batch(batch) => group.push(batch),
                StoreJob::Read(read) => {
                    self.commit(&mut group)?;
                    group.clear();
                    self.read(read)?;
                }
            }
            next = (taken < MAX_GROUP)
                .then(|| self.batches.try_recv().ok())
                .flatten();
        }
        self.commit(&mut group)
    }

    /// Reads part of a session's on-disk queue for its shard.
    fn read(&mut self, read: QueueRead) -> Result<(), StorageError> {
        let messages = self
            .storage
            .queued_after(&read.client_id, Some(read.after), read.limit)?;
        let done = QueueReadDone {
            id: read.id,
            client_id: read.client_id,
            messages,
            limit: read.limit,
        };
        self.state.deliver_read(read.shard, done);
        Ok(())
    }

    /// The next batch, or `None` once every shard is gone; does the idle work that falls due
    /// while waiting ([`Self::idle`]).
    fn next_batch(&mut self) -> Option<StoreJob> {
        loop {
            let Some(wait) = self.idle_wait() else {
                return self.batches.recv().ok();
            };
            match self.batches.recv_timeout(wait) {
                Ok(batch) => return Some(batch),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(error) = self.idle() {
                        self.state.fail(error.to_string());
                        return None;
                    }
                }
            }
        }
    }

    /// How long until idle work falls due (`None`: none is pending).
    fn idle_wait(&self) -> Option<Duration> {
        let interval_sync = (self.sync != SyncPolicy::Batch && self.unsynced)
            .then(|| self.interval.saturating_sub(self.last_sync.elapsed()));
        let collect =
            (self.collect_pending).then(|| IDLE_COLLECT.saturating_sub(self.last_commit.elapsed()));
        interval_sync.into_iter().chain(collect).min()
    }

    /// The idle work that is due: the `interval` policy's sync once the interval ran out, and
    /// handing free memory back once no commit came for [`IDLE_COLLECT`].
    fn idle(&mut self) -> Result<(), StorageError> {
        self.sync_if_needed(false)?;
        if self.collect_pending && self.last_commit.elapsed() >= IDLE_COLLECT {
            ring_runtime::return_free_memory();
            self.collect_pending = false;
        }
        Ok(())
    }

    /// Commits a group as one batch, then publishes what became durable.
    fn commit(&mut self, group: &mut [StoreBatch]) -> Result<(), StorageError> {
        if group.is_empty() {
            return Ok(());
        }
        self.writes.clear();
        for batch in group.iter_mut() {
            self.writes.append(&mut batch.writes);
            let emptied = std::mem::take(&mut batch.writes);
            self.state.recycle_writes(batch.shard, emptied);
        }
        if !self.writes.is_empty() {
            let started = Instant::now();
            let committed = self.storage.commit(&self.writes)?;
            self.state.commit_latency.record(started.elapsed());
            self.writes.clear();
            self.state.commits.fetch_add(1, Ordering::Relaxed);
            self.report_skipped(&committed.skipped);
            self.unsynced = true;
        }
        // `batch` commits are synced by the engine (opened with `SyncMode::EveryCommit`);
        // `interval` ones when the interval runs out.
        self.sync_if_needed(false)?;
        self.state.publish(group);
        self.last_commit = Instant::now();
        self.collect_pending = true;
        Ok(())
    }

    fn sync_if_needed(&mut self, force: bool) -> Result<(), StorageError> {
        if self.sync == SyncPolicy::Batch || !self.unsynced {
            return Ok(());
        }
        if force || self.last_sync.elapsed() >= self.interval {
            self.storage.sync()?;
            self.last_sync = Instant::now();
            self.unsynced = false;
        }
        Ok(())
    }

    fn report_skipped(&self, skipped: &[session_store::storage::Skipped]) {
        if skipped.is_empty() {
            return;
        }
        self.state
            .skipped_writes
            .fetch_add(skipped.len() as u64, Ordering::Relaxed);
        for skip in skipped.iter().take(SKIPPED_LOGGED) {
            tracing::warn!(
                write = skip.write,
                client = %skip.client_id,
                "stored write skipped: it does not follow the stored state"
            );
        }
    }
}
