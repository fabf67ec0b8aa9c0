//! The stored copy of a session released to another node (docs/cluster.md, "Sessions across
//! nodes"). The releasing shard leaves the session in this node's store (`shard/release.rs`)
//! until its owner record names another node run: this node may die after the release and
//! before its reply reaches the claiming node, which then refuses its CONNECT (0x88) and holds
//! nothing. This node's next start finds the session in its store and, the record still naming
//! its earlier run, resumes it (`lifecycle::reconcile`); a record naming another node ends it
//! there as a stale copy. So no release loses a session: the 300-fault run of seed 5050 on
//! 8d6653b lost one so (869 s). While this node lives, [`forget_once_taken`] reads the record
//! until it names another node, and the copy goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use broker_api::ClusterInbound;
use codec::MqttStr;
use ring_runtime::ShardId;
use tracing::{debug, warn};

use super::owner_record::OwnerRecords;
use super::owners::{Owners, RELEASE_TIMEOUT};
use super::released::KEEP;
use super::retained_value::key_of;

/// How often the record is read.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// How long the record is read for: the snapshot may be served again to a later claim until
/// [`KEEP`] has passed, and that claim writes the record within its own release timeout.
const LOOK_FOR: Duration = KEEP.saturating_add(RELEASE_TIMEOUT.saturating_mul(2));

/// Reads `client_id`'s owner record until it names another node run (or none: the session
/// ended there), then has the stored copy removed (`ClusterInbound::ReleaseTaken`); stops
/// once the snapshot released here is forgotten (the session is back here, or its client
/// started afresh: the shard that took it removed the copy). A record still naming this run
/// after [`LOOK_FOR`] leaves the copy for the client's return here or this node's next start.
pub(super) async fn forget_once_taken(owners: Arc<Owners>, client_id: MqttStr) {
    let started = Instant::now();
    let key = key_of(client_id.as_str());
    loop {
        tokio::time::sleep(LOOK_EVERY).await;
        let kept_then = started.elapsed() < KEEP;
        if kept_then && owners.released.again_since(client_id.as_str()).is_none() {
            return debug!(client = %client_id, "cluster: a released session is here again");
        }
        if taken_elsewhere(&owners, &key).await == Some(true) {
            let message = ClusterInbound::ReleaseTaken(client_id.clone());
            if owners.poster.post(ShardId::new(0), vec![message]).is_ok() {
                return debug!(client = %client_id, "cluster: a released session's stored copy goes");
            }
        }
        if started.elapsed() >= LOOK_FOR {
            return warn!(
                client = %client_id,
                "cluster: a session released to another node is not owned there {} s later; its stored copy stays here until its client comes back or this node starts again",
                LOOK_FOR.as_secs()
            );
        }
    }
}

/// Whether the owner record at `key` names another node run than this one, or none; `None`
/// when it was not read within [`LOOK_EVERY`].
async fn taken_elsewhere(owners: &Owners, key: &str) -> Option<bool> {
    let records = &owners.buckets.get()?.sessions;
    let read = tokio::time::timeout(LOOK_EVERY, records.read(key)).await;
    let record = read.ok()?.ok()?;
    Some(record.is_none_or(|(value, _)| value != owners.link.origin.as_bytes()))
}
