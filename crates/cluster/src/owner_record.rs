//! Taking a client id's owner record over with compare-and-set (`owners.rs`). A write that
//! JetStream does not confirm (timed out, a server restarting) may still have landed: the
//! record is read back before the claim gives up the session it rebuilt or was released,
//! rather than taking a failed write for another node's claim (the 300-fault runs dropped
//! recovered sessions so and rebuilt them again, each time reading what they missed anew).

use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use tracing::debug;

/// Writes of the record tried while its revision stays the one read.
const TAKE_TRIES: usize = 3;

/// Whether the record names this run now.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Taken {
    Here,
    /// Another node's write came first (or the record could not be written or read).
    NotHere,
}

/// Replaces `key`'s record at `revision` with `own`, each write and read within `within`.
pub(super) async fn take_record(
    sessions: &kv::Store,
    key: &str,
    own: &Bytes,
    (revision, within): (u64, Duration),
) -> Taken {
    for _ in 0..TAKE_TRIES {
        let update = tokio::time::timeout(within, sessions.update(key, own.clone(), revision));
        let failed = match update.await {
            Ok(Ok(_)) => return Taken::Here,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {within:?}"),
        };
        debug!(
            key,
            error = failed,
            "cluster: owner record not written; read back"
        );
        match tokio::time::timeout(within, sessions.entry(key)).await {
            Ok(Ok(Some(entry))) if entry.operation == kv::Operation::Put && entry.value == *own => {
                return Taken::Here;
            }
            Ok(Ok(Some(entry))) if entry.revision == revision => {} // Unchanged: write again.
            Ok(Ok(_)) => return Taken::NotHere, // Another node's write, or removed.
            _ => {}                             // Not read: try again.
        }
    }
    Taken::NotHere
}
