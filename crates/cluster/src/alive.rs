//! Each node's "alive at" stamp (docs/cluster.md, "When a node restarts"): one record per
//! `node_id` in the key-value bucket `<base>_alive`, which never expires, put again at every
//! heartbeat while the node is connected (its value: the node run, `<node_id>/<nonce>`, then
//! ` g<Unix milliseconds>` while a replay is due, as the heartbeat carries it: `totals.rs`). A
//! node reads its own record before it first puts it: the NATS server's time of that record is
//! the last moment its previous run is known to have been alive and connected, and the value
//! names that run and where the messages it had not replayed start. The heartbeat record
//! itself cannot serve: it expires after `node_timeout_ms`, often before the node is back.

use std::time::{Duration, SystemTime};

use async_nats::jetstream::kv;
use bytes::Bytes;
use tracing::debug;

/// Reads of the previous stamp tried before the node gives up on it (it must be read before
/// this run's first stamp replaces it).
const READ_ATTEMPTS: u32 = 5;
/// The longest one read of the stamp may take.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Wait between two reads of the stamp.
const READ_RETRY: Duration = Duration::from_millis(500);

/// The previous run of this node, as its last stamp shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PreviousRun {
    /// Its node run (`<node_id>/<nonce>`).
    pub(super) origin: String,
    /// The NATS server's time of its last stamp.
    pub(super) alive_at: SystemTime,
    /// Where the messages it had not replayed yet start, if it had a replay due then.
    pub(super) unreplayed_from: Option<SystemTime>,
}

impl PreviousRun {
    /// Up to when the run is known to have received every message: its last stamp, or where
    /// its messages not replayed yet start, if earlier. Why: in the 300-fault run of seed 5050
    /// on 40c9782 (1,400 s) a node cut from NATS for 3 s could not replay (JetStream timed
    /// out) and was killed 13 s later; its restart read from its last stamp and 739 and 740
    /// acknowledged messages of two publishers, published during the cut, were lost.
    pub(super) fn missed_from(&self) -> SystemTime {
        earlier(self.alive_at, self.unreplayed_from)
    }
}

/// `at`, or `gap` if earlier.
fn earlier(at: SystemTime, gap: Option<SystemTime>) -> SystemTime {
    gap.map_or(at, |gap| gap.min(at))
}

/// A stamp's value: the run, and where its messages not replayed yet start (`None`: not a
/// stamp's value).
fn parse_stamp(value: &[u8]) -> Option<(&str, Option<SystemTime>)> {
    super::totals::split_gap(std::str::from_utf8(value).ok()?)
}

/// Why the previous stamp was not read.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum StampError {
    #[error("JetStream did not give the stamp ({READ_ATTEMPTS} tries): {0}")]
    Unread(String),
}

/// This node's stamp in the `<base>_alive` bucket.
pub(super) struct AliveStamp {
    bucket: kv::Store,
    /// The node id (the record's key).
    key: String,
    /// This run (the record's value, before any gap).
    run: String,
}

impl AliveStamp {
    /// The stamp of the node run `origin` in `bucket`.
    pub(super) fn new(bucket: kv::Store, origin: &str) -> Self {
        let node_id = origin.split('/').next().unwrap_or(origin);
        Self {
            bucket,
            key: node_id.to_owned(),
            run: origin.to_owned(),
        }
    }

    /// The previous run's last stamp: `None` when this node never stamped (its first start
    /// with this bucket), or the record names this very run.
    pub(super) async fn previous(&self) -> Result<Option<PreviousRun>, StampError> {
        let mut last_error = String::new();
        for _ in 0..READ_ATTEMPTS {
            match tokio::time::timeout(READ_TIMEOUT, self.bucket.entry(self.key.clone())).await {
                Ok(Ok(entry)) => return Ok(self.previous_in(entry)),
                Ok(Err(e)) => last_error = e.to_string(),
                Err(_) => last_error = format!("no answer within {READ_TIMEOUT:?}"),
            }
            tokio::time::sleep(READ_RETRY).await;
        }
        Err(StampError::Unread(last_error))
    }

    fn previous_in(&self, entry: Option<kv::Entry>) -> Option<PreviousRun> {
        let entry = entry.filter(|e| e.operation == kv::Operation::Put)?;
        let (run, unreplayed_from) = parse_stamp(&entry.value)?;
        if run == self.run {
            return None;
        }
        Some(PreviousRun {
            origin: run.to_owned(),
            alive_at: SystemTime::from(entry.created),
            unreplayed_from,
        })
    }

    /// The bucket the stamps are in (the claims read a dead run's stamp there).
    pub(super) fn bucket(&self) -> &kv::Store {
        &self.bucket
    }

    /// Puts the stamp: this run is alive and connected now, and its messages not replayed yet
    /// start at `unreplayed_from` (a failure is only logged: the next heartbeat puts it again).
    pub(super) async fn put(&self, unreplayed_from: Option<SystemTime>) {
        let value = super::totals::with_gap(self.run.clone(), unreplayed_from);
        if let Err(e) = self.bucket.put(&self.key, Bytes::from(value)).await {
            debug!(error = %e, "cluster: alive stamp not written");
        }
    }
}

/// Up to when the node run `run` (`<node_id>/<nonce>`) is known to have received every
/// message, by its last stamp in `bucket` ([`PreviousRun::missed_from`]): `None` when its node
/// never stamped, a later run of it has stamped since, or JetStream does not answer within
/// `wait`.
pub(super) async fn last_stamp_of(
    bucket: &kv::Store,
    run: &str,
    wait: Duration,
) -> Option<SystemTime> {
    let node_id = run.split('/').next().unwrap_or(run);
    let entry = tokio::time::timeout(wait, bucket.entry(node_id.to_owned()))
        .await
        .ok()?
        .ok()??;
    let (stamped, gap) = parse_stamp(&entry.value)?;
    (entry.operation == kv::Operation::Put && stamped == run)
        .then(|| earlier(SystemTime::from(entry.created), gap))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_carries_where_its_runs_messages_not_replayed_start() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let value = super::super::totals::with_gap("n0/ab12".to_owned(), Some(at));
        assert_eq!(parse_stamp(value.as_bytes()), Some(("n0/ab12", Some(at))));
        assert_eq!(parse_stamp(b"n0/ab12"), Some(("n0/ab12", None)));
        assert_eq!(parse_stamp(b"n0/ab12 gx"), None);
        let previous = PreviousRun {
            origin: "n0/ab12".to_owned(),
            alive_at: at + Duration::from_secs(13),
            unreplayed_from: Some(at),
        };
        assert_eq!(previous.missed_from(), at, "the replay's start, earlier");
        let caught_up = PreviousRun {
            unreplayed_from: None,
            ..previous
        };
        assert_eq!(caught_up.missed_from(), at + Duration::from_secs(13));
    }
}
