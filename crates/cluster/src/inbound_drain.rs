//! What a release waits for first: the messages this node's NATS connection received before
//! the release request, handed on towards the shards. The connection delivers in the order it
//! reads, so when the request is here the messages before it are in their subscriptions'
//! channels; their readers pass them to the inbound task through one bounded queue, which
//! posts them to the shards. A release that overtook them ended the session before they
//! reached it: they were routed to no one, and the node taking the session over reads back
//! only from 1 s before its request. After a node's links to NATS stalled for 3 s (the
//! 300-fault run of seed 5050, 516.1 s), the three seconds of messages and the release request
//! came in at once, and both subscribers lost about 2 s of every publisher's messages, by
//! what the nodes' logs show (the release amid the stalled messages; inferred, not observed).
//!
//! The wait: until the queue has been seen empty twice in a row, [`CHECK_EVERY`] apart (what
//! was posted meanwhile has that long to be routed to the session's shard), at most
//! [`DRAIN_WAIT`] (under a steady flood the queue may never be empty; logged).

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::warn;

use super::Scope;

/// The queue from the NATS subscriptions' readers to the inbound task.
pub(super) type InboundQueue = mpsc::Sender<(Scope, async_nats::Message)>;

/// Between looks at the queue.
const CHECK_EVERY: Duration = Duration::from_millis(20);
/// Looks in a row that must find the queue empty.
const QUIET_CHECKS: u32 = 2;
/// The longest a release waits (within the claiming node's 3 s for the whole release).
const DRAIN_WAIT: Duration = Duration::from_millis(300);

/// Waits until `queue` has drained (see the module), at most [`DRAIN_WAIT`]; `client_id` names
/// the session released, in the warning when the wait runs out.
pub(super) async fn drained(queue: &InboundQueue, client_id: &str) {
    if !quiet_within(queue, DRAIN_WAIT).await {
        let backlog = queue.max_capacity() - queue.capacity();
        warn!(
            client = client_id,
            backlog,
            "cluster: a session is released while messages this node received before the request are still on their way to it; the node taking it over reads back only from 1 s before its request"
        );
    }
}

/// Whether `queue` was seen empty [`QUIET_CHECKS`] times in a row within `within`.
async fn quiet_within<T>(queue: &mpsc::Sender<T>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut quiet = 0;
    while quiet < QUIET_CHECKS {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(CHECK_EVERY).await;
        quiet = match queue.capacity() == queue.max_capacity() {
            true => quiet + 1,
            false => 0,
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_wait_ends_once_the_queue_is_read_empty() {
        let (sender, mut receiver) = mpsc::channel::<u32>(64);
        for n in 0..40 {
            sender.send(n).await.unwrap();
        }
        let reader = tokio::spawn(async move {
            let mut read = 0;
            while receiver.recv().await.is_some() {
                read += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            read
        });
        assert!(quiet_within(&sender, Duration::from_secs(10)).await);
        assert_eq!(
            sender.capacity(),
            sender.max_capacity(),
            "every message read"
        );
        drop(sender);
        assert_eq!(reader.await.unwrap(), 40);
    }

    #[tokio::test]
    async fn a_queue_never_empty_ends_the_wait_at_its_bound() {
        let (sender, _receiver) = mpsc::channel::<u32>(4);
        sender.send(1).await.unwrap();
        assert!(!quiet_within(&sender, Duration::from_millis(100)).await);
    }
}
