//! Session lifecycle tasks of the cluster thread beside the claims (`ownership.rs`): the
//! shards' mirror operations and owner record removals, and the start-up reconciliation of the
//! sessions recovered from this node's store against the owner records.

use std::sync::Arc;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use session_store::storage::StoredSession;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::MirrorOp;
use super::link_state::same_node;
use super::owners::Owners;
use super::retained_value::key_of;

/// Once the buckets are open: each session recovered from this node's store is checked
/// against its owner record. One another node owns now (it took the client over while this
/// node was down) is a stale copy and ends here; the others are recorded as this run's, and
/// returned.
pub(super) async fn reconcile(
    owners: &Owners,
    recovered: Vec<StoredSession>,
) -> Vec<StoredSession> {
    let Some(buckets) = owners.wait_for_buckets().await else {
        return Vec::new();
    };
    let own = Bytes::from(owners.link.origin.clone());
    let mut stale = 0u64;
    let mut ours = Vec::with_capacity(recovered.len());
    for session in recovered {
        let client_id = session.client_id.as_str().to_owned();
        let key = key_of(&client_id);
        let entry = buckets.sessions.entry(key.clone()).await.ok().flatten();
        match entry.filter(|e| e.operation == kv::Operation::Put) {
            None => {
                let _ = buckets.sessions.create(&key, own.clone()).await;
                ours.push(session);
            }
            Some(e) if same_node(&String::from_utf8_lossy(&e.value), &owners.link.origin) => {
                let _ = buckets.sessions.update(&key, own.clone(), e.revision).await;
                ours.push(session);
            }
            Some(_) => {
                stale += 1;
                owners.end_stale(client_id);
            }
        }
    }
    if stale > 0 {
        warn!(
            stale,
            "cluster: sessions recovered from the store that other nodes took over while this node was down were ended here"
        );
    }
    ours
}

/// Carries out the shards' mirror operations once the buckets are open (until then they
/// wait in their bounded queue).
pub(super) async fn mirror_offline_sessions(
    owners: Arc<Owners>,
    mut ops: mpsc::Receiver<MirrorOp>,
) {
    let Some(buckets) = owners.wait_for_buckets().await else {
        return;
    };
    let js = jetstream::new(owners.link.client.clone());
    let counters = &owners.link.counters;
    while let Some(op) = ops.recv().await {
        match op {
            MirrorOp::Ended { client_id } => {
                drop_owner_record(&buckets.sessions, client_id.as_str(), &owners.link.origin).await;
            }
            op => super::mirror::count(buckets.mirror.apply(&js, op).await, counters),
        }
    }
}

/// Removes `client_id`'s owner record if it still names `origin` (compare-and-set on the
/// revision read: a record another node wrote meanwhile stays).
async fn drop_owner_record(sessions: &kv::Store, client_id: &str, origin: &str) {
    let key = key_of(client_id);
    let Ok(Some(entry)) = sessions.entry(key.clone()).await else {
        return;
    };
    if entry.operation == kv::Operation::Put && entry.value == origin.as_bytes() {
        let purged = sessions
            .purge_expect_revision(&key, Some(entry.revision))
            .await;
        if let Err(e) = purged {
            debug!(error = %e, "cluster: owner record not removed");
        }
    }
}
