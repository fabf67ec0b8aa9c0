//! The outbound half of the cluster thread: every message the shards hand over is published
//! to NATS in order, QoS 0 on NATS core, QoS 1/2 as JetStream publishes once the replay stream
//! is open (`reliable.rs`); while NATS is down nothing is taken from the bounded queue. The
//! messages whose PUBACK / PUBREC waits settle in order once sent or kept (`acks.rs`,
//! `settled.rs`).

use std::sync::Arc;
use std::time::Instant;

use async_nats::header::NATS_MESSAGE_ID;
use tokio::sync::{mpsc, oneshot};
use tracing::debug;

use super::acks::{self, ACKS_IN_FLIGHT, Attempt, Pending};
use super::headers;
use super::link_state::Link;
use super::retained_writer::RetainedWrite;
use super::subject::{Root, topic_to_subject};
use super::{ClusterCounters, Outbound, Settled};

/// Publishes every message the shards hand over, in order; while NATS is down, waits (the
/// bounded queue is the buffer). Retained ones also go to the retained bucket's writer. Every
/// message whose acknowledgement waits is settled through the acknowledgement pipeline, in
/// order, whatever becomes of it: a retained one once the bucket kept its record too.
pub(super) async fn outbound(
    link: Arc<Link>,
    mut queue: mpsc::Receiver<Outbound>,
    retained: mpsc::Sender<RetainedWrite>,
    settled: Arc<Settled>,
) {
    let (acks, awaited) = mpsc::channel(ACKS_IN_FLIGHT);
    tokio::spawn(acks::await_acks(Arc::clone(&link), settled, awaited));
    let mut seq = 0u64;
    loop {
        // While NATS is down nothing is taken: the queue (cluster.max_outbound_messages) is
        // the buffer, and what does not fit is dropped by the shards, counted.
        link.wait_connected().await;
        let Some(outbound) = queue.recv().await else {
            break;
        };
        seq += 1;
        let settle = outbound.settle;
        let retained = to_bucket(&link, &outbound, &retained);
        let attempt = publish(&link, outbound, seq).await;
        if settle.is_some() || attempt.is_some() || retained.is_some() {
            let pending = Pending {
                settle,
                attempt,
                retained,
            };
            // Waits here while ACKS_IN_FLIGHT acknowledgements are awaited.
            let _ = acks.send(pending).await;
        }
    }
}

/// Hands a retained message to the bucket's writer; the answer whether the bucket kept its
/// record, when its publisher waits for that (its acknowledgement waits, and the bucket is
/// open: without JetStream the record stays on this node, as before). A write that does not
/// fit in the writer's queue is not kept (counted): its waiting publisher is refused.
fn to_bucket(
    link: &Link,
    outbound: &Outbound,
    writer: &mpsc::Sender<RetainedWrite>,
) -> Option<oneshot::Receiver<bool>> {
    let message = &outbound.message;
    if !message.retain {
        return None;
    }
    let waits = outbound.settle.is_some() && link.retained_open();
    let (kept, answer) = match waits {
        true => {
            let (kept, answer) = oneshot::channel();
            (vec![kept], Some(answer))
        }
        false => (Vec::new(), None),
    };
    let write = RetainedWrite {
        message: Arc::clone(message),
        deadline: outbound
            .deadline
            .unwrap_or_else(|| Instant::now() + link.ack_timeout),
        kept,
    };
    if writer.try_send(write).is_err() {
        ClusterCounters::drop_one(
            &link.counters.retained_failures,
            "cluster.max_outbound_messages retained messages wait for the bucket",
        );
    }
    // A write not queued drops its `kept`: the answer reads as not kept.
    answer
}

/// Publishes one message as its `seq`-th; the JetStream publish to await, if it went to
/// JetStream.
async fn publish(link: &Link, outbound: Outbound, seq: u64) -> Option<Attempt> {
    let Outbound {
        message,
        shares_served,
        deadline,
        ..
    } = outbound;
    let now = link.clock.now();
    // Expired on the way: nobody may receive it.
    let mut headers = headers::encode(&message, &link.origin, seq, now).ok()?;
    if shares_served {
        headers::mark_shares_served(&mut headers);
    }
    // Taken just as NATS went down: it waits here, one beyond the queue's bound.
    link.wait_connected().await;
    let root = Root::of(message.qos);
    let subject = topic_to_subject(&link.prefix, root, message.publish.topic().as_str());
    let payload = message.publish.payload().clone();
    let (sent, attempt) = match (root, link.replays.js.get()) {
        (Root::Reliable, Some(js)) => {
            // JetStream's duplicate window drops a copy published again (`acks.rs`).
            headers.insert(NATS_MESSAGE_ID, format!("{}:{seq}", link.origin).as_str());
            let subject = async_nats::Subject::from(subject);
            let published = js
                .publish_with_headers(subject.clone(), headers.clone(), payload.clone())
                .await;
            let deadline = deadline.unwrap_or_else(|| Instant::now() + link.ack_timeout);
            let (sent, ack) = match published {
                Ok(ack) => (Ok(()), Some(ack)),
                // Made again until its deadline (`acks.rs`).
                Err(e) => (Err(e.to_string()), None),
            };
            let attempt = Attempt {
                subject,
                headers,
                payload,
                ack,
                deadline,
            };
            (sent, Some(attempt))
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
    attempt
}
