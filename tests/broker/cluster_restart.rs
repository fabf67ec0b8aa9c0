//! A node restarts with a connected persistent subscriber (docs/cluster.md, "When a node
//! restarts"): killed with SIGKILL and started again with the same store and port, it gives
//! the session it recovered from its store every QoS 1 message acknowledged to a publisher on
//! another node meanwhile (read back from the replay stream; issue 48), also when the client
//! then moves to another node.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::client::V5;
use crate::cluster::{metric, start_node_with};
use crate::cluster_acks::receive_in_background;
use crate::cluster_recovery::{
    KILL_AFTER, PACE, acknowledged, assert_none_lost, settle_while, subscribed_and_sending,
};
use crate::cluster_sessions::{
    reconnect_once_released_at, reconnect_once_released_with, wait_for_metric,
};
use crate::harness::TestBroker;
use crate::nats_cluster::{NatsCluster, http_get};
use crate::ports::free_port;
use crate::process::BrokerProcess;

/// How long the node stays down.
pub(crate) const DOWN: Duration = Duration::from_secs(2);
const ID: &str = "restart-5";
/// Ample for a node whose buckets are open to name its run in its sessions' owner records.
const RECORDS_CLAIMED: Duration = Duration::from_millis(1500);

/// A persistent 5.0 subscriber (QoS 1) on node 0, a real process with a redb store; a
/// publisher on node 1 sends QoS 1 at 200 a second; node 0 is killed with SIGKILL in the
/// middle and started again 2 s later on the same port with the same store. The subscriber
/// reconnects to node 0 (refused with 0x88 until the new run's NATS connection is up),
/// resumes its session (Session Present 1) and receives every message
/// whose PUBACK was Success, those published while the node was down included, duplicates
/// allowed.
#[test]
fn every_acknowledged_message_reaches_a_subscriber_whose_node_restarted() {
    restart_under_a_subscriber(Back::ToItsNode);
}

/// As above, but the subscriber reconnects to node 2 once the publisher is done and node 0 is
/// back and has read what the session missed: node 0 releases the session with those messages
/// queued, and node 2 delivers every acknowledged message.
#[test]
fn every_acknowledged_message_reaches_a_subscriber_moving_off_a_restarted_node() {
    restart_under_a_subscriber(Back::ToAnotherNode);
}

/// Where the subscriber reconnects once its node is back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Back {
    ToItsNode,
    ToAnotherNode,
}

fn restart_under_a_subscriber(back: Back) {
    let nats = NatsCluster::start();
    let work = tempfile::tempdir().unwrap();
    let (first_run, http, (config, config_path)) = stored_first_run(&nats, work.path());
    let publishing = start_node_with(&nats, 1, "node_timeout_ms = 2000");
    let other = start_node_with(
        &nats,
        2,
        "node_timeout_ms = 2000\n[queues]\nmax_queued_messages = 5000",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let clients = (first_run.addr, publishing.addr(), ID);
    let (before, sending) = subscribed_and_sending(clients, || {}, &stop);
    std::thread::sleep(PACE * u32::from(KILL_AFTER));
    let addr = first_run.addr;
    first_run.kill_9();
    std::thread::sleep(DOWN);
    let mut second_run = BrokerProcess::start_on(addr, &config, &config_path);
    second_run.wait_serving();
    let ((subscriber, present), acks) = match back {
        Back::ToItsNode => (reconnect_once_released_at(addr, V5, ID), sending.join()),
        Back::ToAnotherNode => {
            // Once the publisher is done (what is published during a move between live nodes
            // is tested in `cluster_move.rs`) and node 0's new run
            // has had a moment to claim its sessions' owner records (a claim before would find
            // the old run dead and take the session from the mirror, "When a node dies"):
            // node 2 asks the new run to release the session, which waits for its read.
            let acks = sending.join();
            wait_for_metric(http, "ringmq_cluster_ownership_ready", 1);
            std::thread::sleep(RECORDS_CLAIMED);
            (reconnect_once_released_with(&other, V5, ID), acks)
        }
    };
    assert!(present, "the session came back from the store");
    let after = receive_in_background(subscriber, Arc::clone(&stop));

    let success = acknowledged(&acks.unwrap());
    settle(http, &other);
    stop.store(true, Ordering::Relaxed);
    let (before, after) = (before.join().unwrap(), after.join().unwrap());
    let metrics = http_get(http, "/metrics").unwrap();
    let figure = |name| metric(&metrics, name).unwrap_or(0);
    let replayed = figure("ringmq_cluster_restart_replayed_messages_total");
    let failures = figure("ringmq_cluster_restart_replay_failures_total");
    assert_none_lost(ID, &success, (&before, &after), (replayed, failures));
    assert_eq!(failures, 0);
    if back == Back::ToAnotherNode {
        assert_eq!(figure("ringmq_cluster_sessions_released_total"), 1);
    }
    drop(second_run);
}

/// Node 0 of `nats` (`stored_node_config`) started, its buckets open: the process, its
/// operations port, its config and the config's path (to start it again).
pub(crate) fn stored_first_run(
    nats: &NatsCluster,
    dir: &Path,
) -> (BrokerProcess, u16, (String, std::path::PathBuf)) {
    let http = free_port();
    let config = stored_node_config(nats, dir, http);
    let config_path = dir.join("n0.toml");
    let first_run = BrokerProcess::start(&config, &config_path);
    wait_for_metric(http, "ringmq_cluster_ownership_ready", 1);
    (first_run, http, (config, config_path))
}

/// Node 0 of `nats` with a redb store under `dir` and its operations listener on `http`.
fn stored_node_config(nats: &NatsCluster, dir: &Path, http: u16) -> String {
    format!(
        "[cluster]\nnode_id = \"n0\"\nnats = [\"{}\"]\nreplicas = 3\nnode_timeout_ms = 2000\n\
         [http]\nbind = \"127.0.0.1:{http}\"\n[persistence]\nengine = \"redb\"\ndir = \"{}\"\n\
         [queues]\nmax_queued_messages = 5000\n",
        nats.url(0),
        dir.join("store").display()
    )
}

/// Waits until the messages node 0 (operations listener on `http`) and `other` received from
/// the cluster and from replays stop moving.
pub(crate) fn settle(http: u16, other: &TestBroker) {
    settle_while(|| {
        let metrics = http_get(http, "/metrics")?;
        let figures = other.cluster_figures()?;
        Some(
            metric(&metrics, "ringmq_cluster_messages_in_total")?
                + metric(&metrics, "ringmq_cluster_replayed_messages_total")?
                + figures.messages_in
                + figures.replayed,
        )
    });
}
