//! A node that comes back with its store after its connected client resumed on another node
//! leaves that node's mirror of the session alone (docs/cluster.md, "When a node dies"; issue
//! 48). At its start a node mirrors every session recovered from its store whose client was
//! connected at the crash as offline; for a client another node had taken over, that record
//! replaced the new owner's, and the new owner's death then had the session recovered as
//! offline since the restart: read from there without the delivery journal (the 300-fault run
//! of seed 5050 read the whole replay stream so, 16,000 messages, again and again, and
//! delivered thousands of QoS 2 messages twice).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::time::{Duration, Instant};

use base64::Engine;
use codec::QoS;

use crate::client::V5;
use crate::cluster::{metric, start_node_with};
use crate::cluster_restart::stored_first_run;
use crate::cluster_sessions::{
    connect_persistent_to, reconnect_once_released_with, wait_for_metric,
};
use crate::harness::wait_until;
use crate::nats_cluster::{NatsCluster, http_get};
use crate::process::BrokerProcess;

/// How long the record is watched once the stale copy ended (the node that came back wrote
/// its offline record within milliseconds of opening its buckets).
const WATCHED: Duration = Duration::from_secs(3);

/// Whether `client`'s mirrored session (`<base>_offline` bucket, read from the stream's
/// leader) carries an offline mark; `None` when it cannot be read.
fn mirrored_offline(nats: &NatsCluster, client: &str) -> Option<bool> {
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(client);
    let body = format!(r#"{{"last_by_subj":"$KV.ringmq_offline.{key}"}}"#);
    let reply = nats.request(1, "$JS.API.STREAM.MSG.GET.KV_ringmq_offline", &body)?;
    let reply: serde_json::Value = serde_json::from_str(&reply).ok()?;
    let data = reply["message"]["data"].as_str()?;
    let snapshot = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    let session = session_store::storage::decode_session_snapshot(&snapshot).ok()?;
    Some(session.disconnected_at.is_some())
}

/// A persistent subscriber connected to node 0 (a real process with a redb store) when it is
/// killed resumes on node 1, which mirrors it as connected; node 0 comes back with its store
/// and ends its stale copy without writing over node 1's record.
#[test]
fn a_node_back_after_its_connected_client_moved_leaves_the_new_owners_mirror_alone() {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (first_run, http, (config, config_path)) = stored_first_run(&nats, work.path());
    let survivor = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let (mut mover, _) = connect_persistent_to(first_run.addr, V5, "mover");
    mover.subscribe("move/#", QoS::AtLeastOnce);
    // At the CONNECT and the SUBSCRIBE.
    wait_for_metric(http, "ringmq_cluster_mirror_writes_total", 2);
    let addr = first_run.addr;
    first_run.kill_9();
    let (_mover, present) = reconnect_once_released_with(&survivor, V5, "mover");
    assert!(present, "the session came back from the mirror");
    wait_until("the new owner's record", || {
        let written = survivor.cluster_figures()?.mirror_writes >= 1;
        (written && !mirrored_offline(&nats, "mover")?).then_some(())
    });
    let mut second_run = BrokerProcess::start_on(addr, &config, &config_path);
    second_run.wait_serving();
    wait_until("the stale copy ended on the node that came back", || {
        let metrics = http_get(http, "/metrics")?;
        (metric(&metrics, "ringmq_sessions")? == 0).then_some(())
    });
    let deadline = Instant::now() + WATCHED;
    while Instant::now() < deadline {
        let offline = mirrored_offline(&nats, "mover");
        assert_eq!(offline, Some(false), "the new owner's record replaced");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(second_run);
}
