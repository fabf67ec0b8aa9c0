//! The owner's side of a move between live nodes (docs/cluster.md, "Sessions across nodes"):
//! a release request from a claiming node is answered with the session's snapshot (or again
//! with the one kept a moment ago, `released.rs`), and where the claiming node's follow-up
//! starts travels in the reply's header. `owners.rs` is the claiming side.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use broker_api::cluster::ReleaseRequest;
use broker_api::{ClusterInbound, Reply};
use bytes::{BufMut, Bytes, BytesMut};
use ring_runtime::ShardId;
use tokio::sync::oneshot;
use tracing::{debug, warn};

use super::counters::ClusterCounters;
use super::owners::{Owners, RELEASE_TIMEOUT, RELEASED_MARGIN};
use super::release_wire::{FOLLOW_FROM_HEADER, unix_millis};

/// How long a release waits for the mirror writes queued before it (within the claiming
/// node's [`RELEASE_TIMEOUT`], after the shard's reply's half of it).
const MIRROR_FENCE_WAIT: Duration = Duration::from_secs(1);

impl Owners {
    /// Releases the session another node asks for: the shards close its connection and hand
    /// back its state, which goes back as the reply.
    pub(super) async fn release(self: &Arc<Self>, request: async_nats::Message) {
        let Some(reply_to) = request.reply.clone() else {
            return;
        };
        let (reply, follow_from) = match parse_release(&request.payload) {
            Some((clean_start, client_id)) => {
                let within = RELEASE_TIMEOUT / 2;
                let held =
                    !clean_start && !self.restart.caught_up(client_id.as_str(), within).await;
                if held {
                    // No answer: the claiming node finds this node alive and refuses its
                    // CONNECT (0x88); the client comes back once the session has its messages.
                    return debug!(client = %client_id, "cluster: release put off until the session recovered from the store has what it missed");
                }
                super::inbound_drain::drained(&self.inbound, client_id.as_str()).await;
                self.release_here(client_id, clean_start).await
            }
            None => (Bytes::from_static(&[0]), None),
        };
        let sent = match follow_from {
            Some(at) => {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(FOLLOW_FROM_HEADER, unix_millis(at).to_string().as_str());
                let client = &self.link.client;
                client.publish_with_headers(reply_to, headers, reply).await
            }
            None => self.link.client.publish(reply_to, reply).await,
        };
        if let Err(e) = sent {
            debug!(error = %e, "cluster: release reply not sent");
        }
    }

    /// Asks the shard where a CONNECT claimed `client_id` a moment ago, or else shard 0 (each
    /// forwards to the session's shard), to release `client_id`; the encoded reply, and where
    /// this node's follow-up of the session starts if it is not done.
    async fn release_here(
        self: &Arc<Self>,
        client_id: codec::MqttStr,
        clean_start: bool,
    ) -> (Bytes, Option<SystemTime>) {
        const NONE: (Bytes, Option<SystemTime>) = (Bytes::from_static(&[0]), None);
        let shard = self.claiming.shard_for(client_id.as_str()).await;
        let id = client_id.as_str().to_owned();
        if clean_start {
            self.released.forget(&id); // The client starts afresh.
        }
        let (reply, released) = oneshot::channel();
        let request = ReleaseRequest {
            client_id,
            clean_start,
            reply: Reply::new(move |answer| reply.send(answer)),
            hops: 0,
        };
        let message = ClusterInbound::Release(Box::new(request));
        let shard = shard.unwrap_or(ShardId::new(0));
        if self.poster.post(shard, vec![message]).is_err() {
            return NONE;
        }
        let (snapshot, released_at) = match tokio::time::timeout(RELEASE_TIMEOUT / 2, released)
            .await
        {
            Ok(Ok(Some(snapshot))) => {
                ClusterCounters::add(&self.link.counters.sessions_released, 1);
                let snapshot = Bytes::from(snapshot);
                self.released.keep(&id, snapshot.clone());
                let client_id = codec::MqttStr::try_from(id.as_str());
                let owners = Arc::clone(self);
                if let Ok(client_id) = client_id {
                    tokio::spawn(super::released_copy::forget_once_taken(owners, client_id));
                }
                (snapshot, None)
            }
            // No session here: released a moment ago, its reply maybe lost (`released.rs`).
            Ok(Ok(None)) if !clean_start => match self.released.again_since(&id) {
                Some((snapshot, released_at)) => {
                    warn!(
                        client = id,
                        "cluster: a session released a moment ago is asked for again; its snapshot is sent again"
                    );
                    (snapshot, Some(released_at))
                }
                None => return NONE,
            },
            _ => return NONE,
        };
        self.after_earlier_mirror_writes(&id).await;
        let mut out = BytesMut::with_capacity(1 + snapshot.len());
        out.put_u8(1);
        out.put_slice(&snapshot);
        // What this node may have missed and not replayed yet is in neither the snapshot nor
        // a follow-up starting at the claim: the claiming node's follow-up reads from there.
        let unfinished = earliest(
            self.follow_ups.unfinished_from(&id),
            self.link.replays.unreplayed_from(),
        );
        (
            out.freeze(),
            earliest(unfinished, released_at.map(before_release)),
        )
    }

    /// Waits (at most [`MIRROR_FENCE_WAIT`]) until the mirror writes this node queued before
    /// the release are done: none of them may land after the claiming node mirrored the
    /// session (an old snapshot over the new owner's record).
    async fn after_earlier_mirror_writes(&self, client_id: &str) {
        if !self.mirror_fence.passed(MIRROR_FENCE_WAIT).await {
            warn!(
                client = client_id,
                "cluster: a session leaves before the mirror writes queued for it here are done; one may land over the new owner's record"
            );
        }
    }
}

/// Where the follow-up of a snapshot sent again starts: [`RELEASED_MARGIN`] before it was first
/// released here, since when what reached this node for the session was routed to no one (the
/// claiming node's own start, from its request, would be later). Why: in the 300-fault run of
/// seed 5050 on 20f9b8d (949.9 s) a restarted node released a session while its links were
/// stalled, the claim it went to timed out, and the next claim got the snapshot again 3 s
/// later: the subscriber lost about 0.6 s of every publisher's messages, those that reached the
/// node after the first release and before 1 s ahead of the second request.
fn before_release(released_at: SystemTime) -> SystemTime {
    released_at
        .checked_sub(RELEASED_MARGIN)
        .unwrap_or(released_at)
}

/// The earlier of two optional times.
pub(super) fn earliest(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A release request's payload: `[clean start: 0 | 1][client id]`.
fn parse_release(payload: &[u8]) -> Option<(bool, codec::MqttStr)> {
    let (&flag, id) = payload.split_first()?;
    let text = std::str::from_utf8(id).ok()?;
    Some((flag == 1, codec::MqttStr::try_from(text).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_payloads_round_trip() {
        assert_eq!(
            parse_release(b"\x01dev-7"),
            Some((true, codec::MqttStr::try_from("dev-7").unwrap()))
        );
        assert_eq!(parse_release(b""), None);
    }
}
