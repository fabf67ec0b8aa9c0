//! Reporting how each shard's thread ended, so the process can notice a shard that died
//! (a handler panic or a failed loop) instead of running on half alive.

use std::any::Any;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::ctx::ShardStats;
use crate::error::RuntimeError;
use crate::ids::ShardId;

/// Why a shard's thread ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitCause {
    /// It finished normally, after [`crate::RuntimeHandle::shutdown`].
    Stopped,
    /// Its loop returned an error (the error's text).
    Failed {
        /// The error, as displayed.
        error: String,
    },
    /// The handler (or the runtime) panicked.
    Panicked {
        /// The panic message.
        message: String,
    },
}

/// One shard's end, as recorded by the guard on its thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardExit {
    /// The shard.
    pub shard: ShardId,
    /// How it ended.
    pub cause: ExitCause,
}

impl std::fmt::Display for ShardExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.cause {
            ExitCause::Stopped => write!(f, "shard {} stopped", self.shard),
            ExitCause::Failed { error } => write!(f, "shard {} failed: {error}", self.shard),
            ExitCause::Panicked { message } => {
                write!(f, "shard {} panicked: {message}", self.shard)
            }
        }
    }
}

/// Exits in the order they happened, with a condition variable for waiters.
#[derive(Default)]
pub(crate) struct ExitBoard {
    exits: Mutex<Vec<ShardExit>>,
    changed: Condvar,
}

impl ExitBoard {
    /// Records how a shard's run ended.
    pub(crate) fn record(
        &self,
        shard: ShardId,
        outcome: &Result<Result<ShardStats, RuntimeError>, Box<dyn Any + Send>>,
    ) {
        let cause = match outcome {
            Ok(Ok(_)) => ExitCause::Stopped,
            Ok(Err(error)) => ExitCause::Failed {
                error: error.to_string(),
            },
            Err(payload) => ExitCause::Panicked {
                message: panic_message(payload.as_ref()),
            },
        };
        self.lock().push(ShardExit { shard, cause });
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, Vec<ShardExit>> {
        // Only pushes and clones happen under the lock: a poisoned one is still consistent.
        self.exits.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The text of a panic payload (`&str` or `String`, as `panic!` makes them).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// A cloneable view of the shards' exits, for a thread that watches them
/// ([`crate::RuntimeHandle::exits`]).
#[derive(Clone)]
pub struct ShardExits {
    board: Arc<ExitBoard>,
}

impl ShardExits {
    pub(crate) fn new(board: Arc<ExitBoard>) -> Self {
        Self { board }
    }

    /// Every exit so far, in order.
    pub fn so_far(&self) -> Vec<ShardExit> {
        self.board.lock().clone()
    }

    /// Blocks until some shard has ended; returns the first one that did.
    pub fn wait_first(&self) -> ShardExit {
        let mut exits = self.board.lock();
        loop {
            if let Some(first) = exits.first() {
                return first.clone();
            }
            exits = self
                .board
                .changed
                .wait(exits)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}
