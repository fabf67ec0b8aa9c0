//! Start-up: open the configured engine, load what it kept, end the sessions that expired while
//! the broker was down, and deal the rest to the shards (each session to one shard, every
//! subscription and retained message to every shard's replica).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use codec::MqttStr;
use ring_runtime::ShardId;
use router::{SubscriberId, SubscriptionChange, TopicName};
use session_store::SessionExpiry;
use session_store::storage::{
    LogSize, LoggedStorage, RedbStorage, SessionStorage, SessionWrite, SledStorage, StorageError,
    StoredDelayed, StoredKeys, StoredMessage, StoredSession, SyncMode,
};

use crate::message::Message;
use crate::settings::{PersistenceSettings, StorageEngine, SyncPolicy};
use broker_api::cluster::AcceptedRetained;

/// A stored session dealt to a shard, with the subscriber key it runs under now.
#[derive(Debug)]
pub struct RecoveredSession {
    /// The session, with the in-memory part of its queue.
    pub stored: StoredSession,
    pub subscriber: SubscriberId,
    /// Its whole queue's length (the part beyond `stored.queued` stays on disk).
    pub queued_total: usize,
}

/// What every shard's replica starts from: built once, applied by each shard (retained
/// messages shared between the shards' replicas, as replicated ones are).
#[derive(Debug, Default)]
pub struct ReplicaSeed {
    pub subscriptions: Vec<SubscriptionChange>,
    pub owners: Vec<(SubscriberId, ShardId)>,
    pub retained: Vec<(TopicName, Arc<Message>)>,
}

/// The recovered state waiting for the shards to take it (each shard once, at construction).
#[derive(Debug, Default)]
pub struct Recovery {
    sessions: Mutex<Vec<Vec<RecoveredSession>>>,
    seed: Mutex<Option<Arc<ReplicaSeed>>>,
    /// The delayed messages (`$delayed/`) dealt to each shard (`crate::delayed::deal_delayed`).
    delayed: Mutex<Vec<Vec<(u64, StoredDelayed)>>>,
    /// The retained messages this node accepted from clients, for the cluster to write back.
    accepted_retained: Mutex<Vec<AcceptedRetained>>,
    /// Every recovered session without its messages (subscriptions, expiry, owner), for the
    /// cluster link: what each missed while the node was down is read back for it.
    outlines: Mutex<Vec<StoredSession>>,
    /// The keys of the copies each recovered session's store holds, for the cluster link
    /// (`stored_keys.rs`).
    stored_keys: Mutex<StoredKeys>,
}

impl Recovery {
    /// The sessions dealt to `shard` (empty after the first call).
    pub fn take_sessions(&self, shard: ShardId) -> Vec<RecoveredSession> {
        let Ok(mut sessions) = self.sessions.lock() else {
            return Vec::new();
        };
        sessions
            .get_mut(shard.index())
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The delayed messages dealt to `shard` (empty after the first call).
    pub fn take_delayed(&self, shard: ShardId) -> Vec<(u64, StoredDelayed)> {
        let Ok(mut delayed) = self.delayed.lock() else {
            return Vec::new();
        };
        (delayed.get_mut(shard.index()))
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// The recovered retained messages this node accepted from clients (empty after the first
    /// call).
    pub fn take_accepted_retained(&self) -> Vec<AcceptedRetained> {
        self.accepted_retained
            .lock()
            .map(|mut accepted| std::mem::take(&mut *accepted))
            .unwrap_or_default()
    }

    /// Holds the recovered retained messages this node accepted from clients.
    pub fn hold_accepted_retained(&self, accepted: Vec<AcceptedRetained>) {
        if let Ok(mut slot) = self.accepted_retained.lock() {
            *slot = accepted;
        }
    }

    /// Puts the dealt delayed messages (one list per shard) in place for the shards to take.
    pub fn hold_delayed(&self, dealt: Vec<Vec<(u64, StoredDelayed)>>) {
        if let Ok(mut delayed) = self.delayed.lock() {
            *delayed = dealt;
        }
    }

    /// Keeps the recovered sessions' outlines for the cluster link.
    pub fn hold_outlines(&self, outlines: Vec<StoredSession>) {
        if let Ok(mut held) = self.outlines.lock() {
            *held = outlines;
        }
    }

    /// Keeps the keys of the copies each recovered session's store holds, for the cluster link.
    pub fn hold_stored_keys(&self, keys: StoredKeys) {
        if let Ok(mut held) = self.stored_keys.lock() {
            *held = keys;
        }
    }

    /// The keys of the copies each recovered session's store holds (empty after the first
    /// call, without a store, and on a single node).
    pub fn take_stored_keys(&self) -> StoredKeys {
        (self.stored_keys.lock())
            .map(|mut held| std::mem::take(&mut *held))
            .unwrap_or_default()
    }

    /// The recovered sessions' outlines (empty after the first call, and without a store).
    pub fn take_outlines(&self) -> Vec<StoredSession> {
        let Ok(mut held) = self.outlines.lock() else {
            return Vec::new();
        };
        std::mem::take(&mut *held)
    }

    /// What every replica starts from (none without a stored state).
    pub fn seed(&self) -> Option<Arc<ReplicaSeed>> {
        self.seed.lock().ok()?.clone()
    }

    /// Forgets the seed once every shard holds it (its memory goes with the last shard's copy).
    pub fn release_seed(&self) {
        if let Ok(mut seed) = self.seed.lock() {
            seed.take();
        }
    }

    /// Puts the dealt sessions (one list per shard) and the replicas' seed in place for the
    /// shards to take.
    pub fn hold(&self, dealt: Vec<Vec<RecoveredSession>>, seed: ReplicaSeed) {
        if let Ok(mut sessions) = self.sessions.lock() {
            *sessions = dealt;
        }
        if let Ok(mut slot) = self.seed.lock() {
            *slot = Some(Arc::new(seed));
        }
    }
}

/// A store that cannot be opened or read: the broker does not start.
#[derive(Debug)]
pub struct StoreOpenError {
    engine: &'static str,
    dir: PathBuf,
    cause: StorageError,
}

impl std::fmt::Display for StoreOpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cause = self.cause.to_string();
        write!(
            f,
            "cannot open the {} store in {}: {}. Nothing was deleted. If another broker uses \
             this directory, stop it or set persistence.dir to another one; if the data is \
             damaged or from an incompatible version, move the directory aside (keep it for \
             recovery) and start again with an empty one",
            self.engine,
            self.dir.display(),
            cause.trim_end_matches('.'),
        )
    }
}

/// The cause is part of the message (an operator reads one line), so it is not a `source`.
impl std::error::Error for StoreOpenError {}

/// What a start-up recovery found.
pub struct Opened {
    pub storage: Box<dyn SessionStorage>,
    /// Each session with the in-memory part of its queue, and its whole queue's length.
    pub sessions: Vec<(StoredSession, usize)>,
    /// The highest stored queued sequence number (new ones must be above it).
    pub max_queued_seq: u64,
    pub retained: Vec<(MqttStr, StoredMessage)>,
    /// The pending delayed messages (`$delayed/`), by id.
    pub delayed: Vec<(u64, StoredDelayed)>,
}

/// Opens the configured engine and loads it; sessions that expired while the broker was down
/// are removed from it first. `None` for `engine = "none"`.
pub fn open_and_recover(settings: &PersistenceSettings) -> Result<Option<Opened>, StoreOpenError> {
    let started = Instant::now();
    let sync = match settings.sync {
        SyncPolicy::Batch => SyncMode::EveryCommit,
        SyncPolicy::Interval => SyncMode::Deferred,
    };
    let fail = |cause| StoreOpenError {
        engine: settings.engine.name(),
        dir: settings.dir.clone(),
        cause,
    };
    let mut storage: Box<dyn SessionStorage> = match settings.engine {
        StorageEngine::None => return Ok(None),
        StorageEngine::Sled => Box::new(
            SledStorage::open_with_cache(&settings.dir, sync, settings.cache_bytes)
                .map_err(fail)?,
        ),
        StorageEngine::Redb => Box::new(
            RedbStorage::open_with_cache(&settings.dir, sync, settings.cache_bytes)
                .map_err(fail)?,
        ),
        StorageEngine::Log => Box::new(
            LoggedStorage::open_with(
                &settings.dir,
                sync,
                settings.cache_bytes,
                LogSize {
                    bytes: settings.log_bytes,
                    max_bytes: settings.log_max_bytes,
                },
            )
            .map_err(fail)?,
        ),
    };
    let memory_queue = settings.memory_queue_messages as usize;
    let paged = storage.load_paged(memory_queue).map_err(fail)?;
    let loaded = paged.recovered;
    let max_queued_seq = paged.max_queued_seq;
    let sessions = loaded
        .sessions
        .into_iter()
        .zip(paged.queued_totals)
        .collect();
    let (live, expired) = split_expired(sessions, SystemTime::now());
    if !expired.is_empty() {
        storage.commit(&expired).map_err(fail)?;
        storage.sync().map_err(fail)?;
    }
    let queued: usize = live.iter().map(|(_, total)| total).sum();
    let inflight: usize = live.iter().map(|(s, _)| s.inflight.len()).sum();
    tracing::info!(
        engine = settings.engine.name(),
        dir = %settings.dir.display(),
        sessions = live.len(),
        expired_while_down = expired.len(),
        queued,
        inflight,
        retained = loaded.retained.len(),
        delayed = loaded.delayed.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "persistent state recovered"
    );
    Ok(Some(Opened {
        max_queued_seq,
        storage,
        sessions: live,
        retained: loaded.retained,
        delayed: loaded.delayed,
    }))
}

/// The sessions still alive at `now` (with their whole queue lengths), and the removals of
/// those whose expiry ran out.
fn split_expired(
    sessions: Vec<(StoredSession, usize)>,
    now: SystemTime,
) -> (Vec<(StoredSession, usize)>, Vec<SessionWrite>) {
    let mut live = Vec::with_capacity(sessions.len());
    let mut expired = Vec::new();
    for (session, total) in sessions {
        if has_expired(&session, now) {
            expired.push(SessionWrite::SessionRemoved {
                client_id: session.client_id,
            });
        } else {
            live.push((session, total));
        }
    }
    (live, expired)
}

fn has_expired(session: &StoredSession, now: SystemTime) -> bool {
    let Some(at) = session.disconnected_at else {
        return session.expiry == SessionExpiry::OnClose;
    };
    match session.expiry {
        SessionExpiry::OnClose => true,
        SessionExpiry::Never => false,
        SessionExpiry::After(secs) => {
            now.duration_since(at).unwrap_or_default() >= Duration::from_secs(u64::from(secs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codec::ProtocolVersion;

    fn session(expiry: SessionExpiry, down_for: Option<u64>, now: SystemTime) -> StoredSession {
        let mut s = StoredSession::new(
            MqttStr::from_static("c").unwrap(),
            ProtocolVersion::V5,
            expiry,
            None,
        );
        s.disconnected_at = down_for.map(|secs| now - Duration::from_secs(secs));
        s
    }

    #[test]
    fn expiry_counts_the_time_the_broker_was_down() {
        let now = SystemTime::now();
        let after = SessionExpiry::After(60);
        assert!(!has_expired(&session(after, Some(59), now), now));
        assert!(has_expired(&session(after, Some(61), now), now));
        assert!(!has_expired(
            &session(SessionExpiry::Never, Some(1 << 30), now),
            now
        ));
        assert!(
            !has_expired(&session(after, None, now), now),
            "a session connected at the crash counts from the restart"
        );
    }
}
