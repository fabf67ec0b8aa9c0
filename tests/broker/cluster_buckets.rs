//! The cluster's key-value buckets are read through their streams' leaders
//! (docs/cluster.md, "Sessions across nodes"): a replica behind the leader answers a direct
//! get with an old record, on which a claim's compare-and-set then fails.

use crate::cluster::start_node_with;
use crate::harness::wait_until;
use crate::nats_cluster::NatsCluster;

/// Every bucket a node opens is read through the leader, one that an earlier version made with
/// direct gets included (its stream is updated, its other settings kept).
#[test]
fn every_bucket_is_read_through_its_streams_leader() {
    let nats = NatsCluster::start();
    let earlier = r#"{"name":"KV_ringmq_sessions","subjects":["$KV.ringmq_sessions.>"],
        "max_msgs_per_subject":1,"max_msg_size":4096,"storage":"file","num_replicas":3,
        "discard":"new","allow_rollup_hdrs":true,"deny_delete":true,"allow_direct":true}"#;
    let created = nats.request(0, "$JS.API.STREAM.CREATE.KV_ringmq_sessions", earlier);
    assert!(
        created
            .as_deref()
            .is_some_and(|r| r.contains("\"allow_direct\":true")),
        "{created:?}"
    );
    let _node = start_node_with(&nats, 0, "");
    for bucket in ["sessions", "nodes", "alive", "offline", "retained"] {
        let subject = format!("$JS.API.STREAM.INFO.KV_ringmq_{bucket}");
        wait_until(
            &format!("the {bucket} bucket read through its leader"),
            || {
                let info = nats.request(1, &subject, "")?;
                (info.contains("\"config\"") && !info.contains("\"allow_direct\":true"))
                    .then_some(())
            },
        );
    }
    let sessions = nats.request(2, "$JS.API.STREAM.INFO.KV_ringmq_sessions", "");
    assert!(
        sessions
            .as_deref()
            .is_some_and(|i| i.contains("\"max_msg_size\":4096")),
        "its other settings kept: {sessions:?}"
    );
}
