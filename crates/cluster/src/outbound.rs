//! The outbound half of the cluster thread: every message the shards hand over is published
//! to NATS in order, QoS 0 on NATS core, QoS 1/2 as JetStream publishes once the replay stream
//! is open (`reliable.rs`); while NATS is down nothing is taken from the bounded queue. The
//! messages whose PUBACK / PUBREC waits settle in order once sent or kept (`settled.rs`).

use std::sync::Arc;

use async_nats::connection::State;
use tokio::sync::mpsc;
use tracing::debug;

use super::headers;
use super::link_state::Link;
use async_nats::jetstream::context::PublishAckFuture;

use super::reliable::{self, ACKS_IN_FLIGHT, Pending};
use super::subject::{Root, topic_to_subject};
use super::{ClusterCounters, Outbound, Settled};
use broker_api::Message;

/// Publishes every message the shards hand over, in order; while NATS is down, waits (the
/// bounded queue is the buffer). Retained ones also go to the retained bucket's writer. Every
/// message whose acknowledgement waits is settled through the acknowledgement pipeline, in
/// order, whatever becomes of it.
pub(super) async fn outbound(
    link: Arc<Link>,
    mut queue: mpsc::Receiver<Outbound>,
    retained: mpsc::Sender<Arc<Message>>,
    settled: Arc<Settled>,
) {
    let (acks, awaited) = mpsc::channel(ACKS_IN_FLIGHT);
    tokio::spawn(reliable::await_acks(
        Arc::clone(&link.counters),
        settled,
        awaited,
    ));
    let mut seq = 0u64;
    loop {
        // While NATS is down nothing is taken: the queue (cluster.max_outbound_messages) is
        // the buffer, and what does not fit is dropped by the shards, counted.
        wait_connected(&link).await;
        let Some(outbound) = queue.recv().await else {
            break;
        };
        seq += 1;
        let settle = outbound.settle;
        let ack = publish(&link, outbound, seq, &retained).await;
        if settle.is_some() || ack.is_some() {
            // Waits here while ACKS_IN_FLIGHT acknowledgements are awaited.
            let _ = acks.send(Pending { settle, ack }).await;
        }
    }
}

/// Publishes one message as its `seq`-th; JetStream's acknowledgement to await, if it went
/// to JetStream.
async fn publish(
    link: &Link,
    outbound: Outbound,
    seq: u64,
    retained: &mpsc::Sender<Arc<Message>>,
) -> Option<PublishAckFuture> {
    let Outbound {
        message,
        shares_served,
        ..
    } = outbound;
    if message.retain && retained.try_send(Arc::clone(&message)).is_err() {
        ClusterCounters::drop_one(
            &link.counters.retained_failures,
            "cluster.max_outbound_messages retained messages wait for the bucket",
        );
    }
    let now = link.clock.now();
    // Expired on the way: nobody may receive it.
    let mut headers = headers::encode(&message, &link.origin, seq, now).ok()?;
    if shares_served {
        headers::mark_shares_served(&mut headers);
    }
    // Taken just as NATS went down: it waits here, one beyond the queue's bound.
    wait_connected(link).await;
    let root = Root::of(message.qos);
    let subject = topic_to_subject(&link.prefix, root, message.publish.topic().as_str());
    let payload = message.publish.payload().clone();
    let (sent, ack) = match (root, link.replays.js.get()) {
        (Root::Reliable, Some(js)) => {
            match js.publish_with_headers(subject, headers, payload).await {
                Ok(ack) => (Ok(()), Some(ack)),
                Err(e) => (Err(e.to_string()), None),
            }
        }
        _ => {
            let client = &link.client;
            let sent = client.publish_with_headers(subject, headers, payload).await;
            (sent.map_err(|e| e.to_string()), None)
        }
    };
    match sent {
        Ok(()) => ClusterCounters::add(&link.counters.messages_out, 1),
        Err(e) => {
            debug!(error = %e, "cluster: publish failed");
            ClusterCounters::drop_one(
                &link.counters.dropped_disconnected,
                "NATS refused the publish (over its max_payload?)",
            );
        }
    }
    ack
}

/// Returns once the main NATS connection is up.
pub(super) async fn wait_connected(link: &Link) {
    while link.client.connection_state() != State::Connected {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
