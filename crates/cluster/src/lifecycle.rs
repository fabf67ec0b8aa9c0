//! Session lifecycle tasks of the cluster thread beside the claims (`ownership.rs`): the
//! shards' mirror operations and owner record removals, and the start-up reconciliation of the
//! sessions recovered from this node's store against the owner records.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use session_store::storage::StoredSession;
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, warn};

use super::MirrorOp;
use super::link_state::same_node;
use super::mirror_queue::MirrorWork;
use super::owner_record::OwnerRecords;
use super::owners::{Owners, StaleEnd};
use super::retained_value::key_of;

/// Once the buckets are open: each session recovered from this node's store is checked
/// against its owner record. One another node owns now (it took the client over while this
/// node was down) is a stale copy and ends here (its mirror writes dropped until then,
/// [`forget_stale_once_ended`]); the others are recorded as this run's, and returned.
pub(super) async fn reconcile(
    owners: &Arc<Owners>,
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
        match settle(&buckets.sessions, &key, &own).await {
            Settled::Ours => ours.push(session),
            Settled::Stale => {
                stale += 1;
                owners.restart.mark_stale(&client_id);
                let ended = owners.end_stale(client_id.clone());
                tokio::spawn(forget_stale_once_ended(
                    Arc::clone(owners),
                    client_id,
                    ended,
                ));
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

/// How long the end of a stale copy, then the mirror writes queued before it, are waited for.
const STALE_END_WAIT: Duration = Duration::from_secs(3);

/// Once the stale copy of `client_id` is ended on its shard (`ended`) and the mirror writes
/// its shard queued before are passed (dropped), the client's mirror writes are made again:
/// the client may come back to this node.
async fn forget_stale_once_ended(
    owners: Arc<Owners>,
    client_id: String,
    ended: Option<oneshot::Receiver<StaleEnd>>,
) {
    if let Some(ended) = ended {
        let _ = tokio::time::timeout(STALE_END_WAIT, ended).await;
    }
    owners.mirror_fence.passed(STALE_END_WAIT).await;
    owners.restart.unmark_stale(&client_id);
}

/// Whose a session recovered from this node's store is, once its owner record names this run
/// or another node.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    /// The record names this run (created, or taken from an earlier run of this node), or
    /// could not be read or written (NATS did not answer: kept, as a CONNECT is admitted
    /// unchecked then).
    Ours,
    /// Another node owns it.
    Stale,
}

/// Attempts of [`settle`] against other nodes' writes of the record.
const SETTLE_ATTEMPTS: usize = 5;

/// Makes `key`'s owner record name `own` (this run) if it names no node or an earlier run of
/// this node, with compare-and-set on what was read; a write that fails is read again. Why:
/// another node may be claiming the client id from the dead earlier run at this very moment
/// (its CONNECT waits while it rebuilds the session from the mirror, `dead_owner.rs`), and its
/// compare-and-set on the same revision may land between this read and this write. Taken as
/// this run's regardless, the session would live on both nodes: the other node's copy with
/// the client, this node's (its restart catch-up routed to it) owning nothing, and whichever
/// the client resumed later could lack what the other one queued.
async fn settle(records: &impl OwnerRecords, key: &str, own: &Bytes) -> Settled {
    let origin = String::from_utf8_lossy(own);
    for _ in 0..SETTLE_ATTEMPTS {
        let Ok(record) = records.read(key).await else {
            return Settled::Ours;
        };
        let written = match record {
            None => records.create(key, own.clone()).await,
            Some((value, _)) if value == *own => true,
            Some((value, revision)) if same_node(&String::from_utf8_lossy(&value), &origin) => {
                records.update(key, own.clone(), revision).await
            }
            Some(_) => return Settled::Stale,
        };
        if written {
            return Settled::Ours;
        }
        debug!(
            key,
            "cluster: an owner record changed while a recovered session was checked; read again"
        );
    }
    Settled::Ours
}

/// Carries out the shards' mirror operations once the buckets are open and the sessions
/// recovered from this node's store are checked against their owner records (until then they
/// wait in their bounded queue). A stale recovered copy's offline snapshot and queued copies
/// are not written: at its start the node mirrors every recovered session whose client was
/// connected at the crash as offline, and for a client another node took over meanwhile that
/// replaced the new owner's record with an old offline one. The new owner's death then had the
/// session recovered as offline since then, read from that moment without the delivery journal
/// (the 300-fault run of seed 5050: the whole replay stream, 16,000 messages, and thousands of
/// QoS 2 messages delivered twice, again and again).
pub(super) async fn mirror_offline_sessions(
    owners: Arc<Owners>,
    mut ops: mpsc::Receiver<MirrorWork>,
) {
    let Some(buckets) = owners.wait_for_buckets().await else {
        return;
    };
    owners.restart.all_settled().await;
    let js = jetstream::new(owners.link.client.clone());
    let counters = &owners.link.counters;
    while let Some(op) = ops.recv().await {
        match op {
            MirrorWork::Fence(done) => {
                let _ = done.send(()); // A release that stopped waiting.
            }
            MirrorWork::Op(MirrorOp::Ended { client_id }) => {
                drop_owner_record(&buckets.sessions, client_id.as_str(), &owners.link.origin).await;
            }
            MirrorWork::Op(
                MirrorOp::Offline { client_id, .. } | MirrorOp::Queued { client_id, .. },
            ) if owners.restart.is_stale(client_id.as_str()) => {
                debug!(client = %client_id, "cluster: a stale recovered copy is not mirrored");
            }
            MirrorWork::Op(op) => {
                super::mirror::count(buckets.mirror.apply(&js, op).await, counters)
            }
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// One owner record in memory; `claim_before_write`: another node's compare-and-set that
    /// lands between this node's read and its write (once).
    struct Record {
        value: Mutex<Option<(Bytes, u64)>>,
        claim_before_write: Mutex<Option<Bytes>>,
    }

    impl Record {
        fn new(value: Option<&'static str>, other: Option<&'static str>) -> Self {
            Self {
                value: Mutex::new(value.map(|v| (Bytes::from_static(v.as_bytes()), 1))),
                claim_before_write: Mutex::new(other.map(|v| Bytes::from_static(v.as_bytes()))),
            }
        }

        /// The other node's write, if it is due: it replaces the record (its own
        /// compare-and-set on the revision it read, the one this node read too).
        fn other_node_writes(&self) {
            if let Some(other) = self.claim_before_write.lock().unwrap().take() {
                let mut value = self.value.lock().unwrap();
                let revision = value.as_ref().map_or(0, |(_, r)| *r) + 1;
                *value = Some((other, revision));
            }
        }

        fn names(&self) -> String {
            let value = self.value.lock().unwrap();
            value.as_ref().map_or(String::new(), |(v, _)| {
                String::from_utf8_lossy(v).into_owned()
            })
        }
    }

    impl OwnerRecords for Record {
        async fn read(&self, _: &str) -> Result<Option<(Bytes, u64)>, ()> {
            Ok(self.value.lock().unwrap().clone())
        }

        async fn create(&self, _: &str, value: Bytes) -> bool {
            self.other_node_writes();
            let mut record = self.value.lock().unwrap();
            if record.is_some() {
                return false;
            }
            *record = Some((value, 1));
            true
        }

        async fn update(&self, _: &str, value: Bytes, revision: u64) -> bool {
            self.other_node_writes();
            let mut record = self.value.lock().unwrap();
            match record.as_ref() {
                Some((_, now)) if *now == revision => {
                    *record = Some((value, revision + 1));
                    true
                }
                _ => false,
            }
        }
    }

    const OWN: Bytes = Bytes::from_static(b"n1/new");

    #[tokio::test]
    async fn a_record_of_no_node_or_of_an_earlier_run_becomes_this_runs() {
        for before in [None, Some("n1/old"), Some("n1/new")] {
            let record = Record::new(before, None);
            assert_eq!(settle(&record, "k", &OWN).await, Settled::Ours);
            assert_eq!(record.names(), "n1/new", "record before: {before:?}");
        }
    }

    #[tokio::test]
    async fn a_record_of_another_node_makes_the_session_stale() {
        let record = Record::new(Some("n2/a"), None);
        assert_eq!(settle(&record, "k", &OWN).await, Settled::Stale);
        assert_eq!(record.names(), "n2/a");
    }

    /// The race the fault runs open (a node killed with a persistent session and started
    /// again while another node recovers that session from the mirror): the other node's
    /// claim from the dead earlier run writes the record between this node's read and write.
    /// Taken as this run's anyway (the write's result ignored, as before), the session lived
    /// on both nodes.
    #[tokio::test]
    async fn another_nodes_claim_between_the_read_and_the_write_makes_the_session_stale() {
        let record = Record::new(Some("n1/old"), Some("n2/a"));
        assert_eq!(settle(&record, "k", &OWN).await, Settled::Stale);
        assert_eq!(record.names(), "n2/a", "the other node's claim stands");
        let record = Record::new(None, Some("n2/a"));
        assert_eq!(settle(&record, "k", &OWN).await, Settled::Stale);
    }
}
