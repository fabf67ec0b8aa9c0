//! Checkpoints: an epoch's net writes applied to the B-tree in one redb transaction, together
//! with the epoch's number (so that a restart replays only the epochs after it), on a thread of
//! their own: the store thread goes on logging the next epoch meanwhile.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use std::thread::JoinHandle;

use ::redb::{Database, Durability, TableDefinition};

use super::pending::Pending;
use crate::storage::StorageError;
use crate::storage::redb_storage::{TABLE, engine_error};

/// The log's own table: the last epoch checkpointed.
const LOG_TABLE: TableDefinition<'_, &str, u64> = TableDefinition::new("log");
const CHECKPOINTED: &str = "checkpointed";

/// Applies `pending` to the B-tree and records `epoch` as checkpointed, durably, in one
/// transaction.
pub(super) fn apply(
    db: &Database,
    path: &Path,
    epoch: u64,
    pending: &Pending,
) -> Result<(), StorageError> {
    let error = |e: &dyn std::fmt::Display| engine_error(path, e);
    let mut txn = db.begin_write().map_err(|e| error(&e))?;
    txn.set_durability(Durability::Immediate);
    {
        let mut table = txn.open_table(TABLE).map_err(|e| error(&e))?;
        for (key, value) in pending.writes() {
            let done = match value {
                Some(value) => table.insert(key.as_slice(), value).map(drop),
                None => table.remove(key.as_slice()).map(drop),
            };
            done.map_err(|e| error(&e))?;
        }
        let mut log = txn.open_table(LOG_TABLE).map_err(|e| error(&e))?;
        log.insert(CHECKPOINTED, epoch).map_err(|e| error(&e))?;
    }
    txn.commit().map_err(|e| error(&e))
}

/// The last epoch checkpointed into `db` (0: none).
pub(super) fn checkpointed(db: &Database, path: &Path) -> Result<u64, StorageError> {
    let error = |e: &dyn std::fmt::Display| engine_error(path, e);
    let txn = db.begin_read().map_err(|e| error(&e))?;
    let table = match txn.open_table(LOG_TABLE) {
        Ok(table) => table,
        Err(::redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(error(&e)),
    };
    let epoch = table.get(CHECKPOINTED).map_err(|e| error(&e))?;
    Ok(epoch.map_or(0, |epoch| epoch.value()))
}

/// An epoch handed to the checkpoint thread.
struct Job {
    epoch: u64,
    pending: Arc<Pending>,
}

/// Where checkpoints run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checkpoints {
    /// On a thread of their own, beside the store thread's logging (the broker's way).
    OnThread,
    /// On the store thread, each one done at a later poll drawn from `seed` (up to three
    /// commits after it was handed over) or at the wait before the next epoch: the same
    /// order of writes for a seed, so that a simulated-disk test reproduces.
    #[cfg(test)]
    Stepped { seed: u64 },
}

/// The checkpoint thread: one checkpoint at a time.
#[derive(Debug)]
pub(super) struct Checkpointer {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Result<(), StorageError>>,
    thread: Option<JoinHandle<()>>,
    /// A checkpoint was handed over and its result not yet taken.
    busy: bool,
    #[cfg(test)]
    stepped: Option<stepped::Stepped>,
}

impl Checkpointer {
    /// Starts the thread, checkpointing into `db` (none with [`Checkpoints::Stepped`]).
    pub(super) fn start(
        db: Arc<Database>,
        path: PathBuf,
        checkpoints: Checkpoints,
    ) -> Result<Self, StorageError> {
        let (jobs, incoming) = mpsc::sync_channel::<Job>(1);
        let (report, done) = mpsc::sync_channel(1);
        let thread = match checkpoints {
            Checkpoints::OnThread => Some(spawn(db.clone(), path.clone(), incoming, report)?),
            #[cfg(test)]
            Checkpoints::Stepped { .. } => None,
        };
        Ok(Self {
            jobs: Some(jobs),
            done,
            thread,
            busy: false,
            #[cfg(test)]
            stepped: stepped::Stepped::new(checkpoints, db, path),
        })
    }

    /// Hands `pending`, the whole of `epoch`, to the thread (after [`Self::wait`]).
    pub(super) fn submit(&mut self, epoch: u64, pending: Arc<Pending>) -> Result<(), StorageError> {
        #[cfg(test)]
        if let Some(stepped) = &mut self.stepped {
            stepped.submit(Job { epoch, pending });
            self.busy = true;
            return Ok(());
        }
        let sent = self
            .jobs
            .as_ref()
            .map(|jobs| jobs.send(Job { epoch, pending }));
        match sent {
            Some(Ok(())) => {
                self.busy = true;
                Ok(())
            }
            _ => Err(stopped()),
        }
    }

    /// Whether the last checkpoint handed over is done (`true` also when none is running).
    pub(super) fn poll(&mut self) -> Result<bool, StorageError> {
        if !self.busy {
            return Ok(true);
        }
        #[cfg(test)]
        if let Some(stepped) = &mut self.stepped {
            return match stepped.poll() {
                Some(applied) => self.finished(applied).map(|()| true),
                None => Ok(false),
            };
        }
        match self.done.try_recv() {
            Ok(applied) => self.finished(applied).map(|()| true),
            Err(TryRecvError::Empty) => Ok(false),
            Err(TryRecvError::Disconnected) => Err(stopped()),
        }
    }

    /// Waits for the last checkpoint handed over to be done.
    pub(super) fn wait(&mut self) -> Result<(), StorageError> {
        if !self.busy {
            return Ok(());
        }
        #[cfg(test)]
        if let Some(stepped) = &mut self.stepped {
            let applied = stepped.finish();
            return self.finished(applied);
        }
        let applied = self.done.recv().map_err(|_| stopped())?;
        self.finished(applied)
    }

    fn finished(&mut self, applied: Result<(), StorageError>) -> Result<(), StorageError> {
        self.busy = false;
        applied
    }
}

/// Starts the checkpoint thread: it applies each job it receives and reports the result.
fn spawn(
    db: Arc<Database>,
    path: PathBuf,
    incoming: Receiver<Job>,
    report: SyncSender<Result<(), StorageError>>,
) -> Result<JoinHandle<()>, StorageError> {
    std::thread::Builder::new()
        .name("ringmq-checkpoint".into())
        .spawn(move || {
            for job in incoming {
                let applied = apply(&db, &path, job.epoch, &job.pending);
                if report.send(applied).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| StorageError::Engine {
            engine: super::error::ENGINE,
            reason: format!("cannot start the checkpoint thread: {e}"),
        })
}

impl Drop for Checkpointer {
    /// Lets a running checkpoint finish and ends the thread (the database is then free to be
    /// opened again).
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn stopped() -> StorageError {
    StorageError::Engine {
        engine: super::error::ENGINE,
        reason: "the checkpoint thread stopped".into(),
    }
}

/// Checkpoints on the store thread, on a seeded schedule (see [`Checkpoints::Stepped`]).
#[cfg(test)]
mod stepped {
    use super::*;

    #[derive(Debug)]
    pub(super) struct Stepped {
        db: Arc<Database>,
        path: PathBuf,
        rng: u64,
        job: Option<Job>,
        /// Polls left before the job is done.
        polls_left: u64,
    }

    impl std::fmt::Debug for Job {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Job").field("epoch", &self.epoch).finish()
        }
    }

    impl Stepped {
        pub(super) fn new(
            checkpoints: Checkpoints,
            db: Arc<Database>,
            path: PathBuf,
        ) -> Option<Self> {
            match checkpoints {
                Checkpoints::OnThread => None,
                Checkpoints::Stepped { seed } => Some(Self {
                    db,
                    path,
                    rng: seed | 1,
                    job: None,
                    polls_left: 0,
                }),
            }
        }

        pub(super) fn submit(&mut self, job: Job) {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.polls_left = self.rng % 4;
            self.job = Some(job);
        }

        pub(super) fn poll(&mut self) -> Option<Result<(), StorageError>> {
            if self.polls_left > 0 {
                self.polls_left -= 1;
                return None;
            }
            Some(self.finish())
        }

        pub(super) fn finish(&mut self) -> Result<(), StorageError> {
            match self.job.take() {
                Some(job) => apply(&self.db, &self.path, job.epoch, &job.pending),
                None => Ok(()),
            }
        }
    }
}
