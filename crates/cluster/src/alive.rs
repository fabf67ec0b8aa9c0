//! Each node's "alive at" stamp (docs/cluster.md, "When a node restarts"): one record per
//! `node_id` in the key-value bucket `<base>_alive`, which never expires, put again at every
//! heartbeat while the node is connected (its value: the node run, `<node_id>/<nonce>`). A node
//! reads its own record before it first puts it: the NATS server's time of that record is the
//! last moment its previous run is known to have been alive and connected, and the value names
//! that run. The heartbeat record itself cannot serve: it expires after `node_timeout_ms`, often
//! before the node is back.

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
    /// This run (the record's value).
    run: Bytes,
}

impl AliveStamp {
    /// The stamp of the node run `origin` in `bucket`.
    pub(super) fn new(bucket: kv::Store, origin: &str) -> Self {
        let node_id = origin.split('/').next().unwrap_or(origin);
        Self {
            bucket,
            key: node_id.to_owned(),
            run: Bytes::from(origin.to_owned()),
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
        if entry.value == self.run {
            return None;
        }
        Some(PreviousRun {
            origin: String::from_utf8_lossy(&entry.value).into_owned(),
            alive_at: SystemTime::from(entry.created),
        })
    }

    /// The bucket the stamps are in (the claims read a dead run's stamp there).
    pub(super) fn bucket(&self) -> &kv::Store {
        &self.bucket
    }

    /// Puts the stamp: this run is alive and connected now (a failure is only logged: the
    /// next heartbeat puts it again).
    pub(super) async fn put(&self) {
        if let Err(e) = self.bucket.put(&self.key, self.run.clone()).await {
            debug!(error = %e, "cluster: alive stamp not written");
        }
    }
}

/// The last stamp of the node run `run` (`<node_id>/<nonce>`) in `bucket`: `None` when its node
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
    (entry.operation == kv::Operation::Put && entry.value == run.as_bytes())
        .then(|| SystemTime::from(entry.created))
}
