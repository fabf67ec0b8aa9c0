//! The outbound half of the cluster thread: every message the shards hand over is published
//! to NATS in order, QoS 0 on NATS core, QoS 1/2 as JetStream publishes once the replay stream
//! is open (`reliable.rs`); while NATS is down nothing is taken from the bounded queue.

use std::sync::Arc;

use async_nats::connection::State;
use tokio::sync::mpsc;
use tracing::debug;

use super::headers;
use super::link::Link;
use super::reliable::{self, ACKS_IN_FLIGHT};
use super::subject::{Root, topic_to_subject};
use super::{ClusterCounters, Outbound};
use crate::message::Message;

/// Publishes every message the shards hand over, in order; while NATS is down, drops them
/// (counted). Retained ones also go to the retained bucket's writer.
pub(super) async fn outbound(
    link: Arc<Link>,
    mut queue: mpsc::Receiver<Outbound>,
    retained: mpsc::Sender<Arc<Message>>,
) {
    let (acks, awaited) = mpsc::channel(ACKS_IN_FLIGHT);
    tokio::spawn(reliable::await_acks(Arc::clone(&link.counters), awaited));
    let mut seq = 0u64;
    loop {
        // While NATS is down nothing is taken: the queue (cluster.max_outbound_messages) is
        // the buffer, and what does not fit is dropped by the shards, counted.
        wait_connected(&link).await;
        let Some(Outbound {
            message,
            shares_served,
        }) = queue.recv().await
        else {
            break;
        };
        if message.retain && retained.try_send(Arc::clone(&message)).is_err() {
            ClusterCounters::drop_one(
                &link.counters.retained_failures,
                "cluster.max_outbound_messages retained messages wait for the bucket",
            );
        }
        seq += 1;
        let now = link.clock.now();
        let Ok(mut headers) = headers::encode(&message, &link.origin, seq, now) else {
            continue; // expired on the way: nobody may receive it
        };
        if shares_served {
            headers::mark_shares_served(&mut headers);
        }
        // Taken just as NATS went down: it waits here, one beyond the queue's bound.
        wait_connected(&link).await;
        let root = Root::of(message.qos);
        let subject = topic_to_subject(&link.prefix, root, message.publish.topic().as_str());
        let payload = message.publish.payload().clone();
        let sent = match (root, link.replays.js.get()) {
            (Root::Reliable, Some(js)) => {
                match js.publish_with_headers(subject, headers, payload).await {
                    Ok(ack) => {
                        // Waits here while ACKS_IN_FLIGHT acknowledgements are awaited.
                        let _ = acks.send(ack).await;
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            _ => link
                .client
                .publish_with_headers(subject, headers, payload)
                .await
                .map_err(|e| e.to_string()),
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
    }
}

/// Returns once the main NATS connection is up.
pub(super) async fn wait_connected(link: &Link) {
    while link.client.connection_state() != State::Connected {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
