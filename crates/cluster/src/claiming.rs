//! Client ids this node is claiming, or claimed a moment ago (docs/cluster.md, "Sessions
//! across nodes"). Two CONNECTs of one client id on two nodes at once: the first node's
//! compare-and-set wins, and the second node, finding it the owner, asks it to release the
//! session, possibly before the first CONNECT has made one. Such a release request goes to the
//! shard where that CONNECT waits, behind the claim's answer (a shard's mailbox keeps its
//! order), after waiting for the answer if the claim is still under way: the first CONNECT
//! completes, then is taken over (0x8E), and the last CONNECT wins, as on one node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use ring_runtime::ShardId;

/// How long an answered claim is remembered (its CONNECT completes well within it).
const KEEP: Duration = Duration::from_secs(2);
/// The most client ids remembered at once (beyond, a claim is not remembered: the race is
/// then as it was without this, both CONNECTs admitted).
const MAX_REMEMBERED: usize = 65_536;
/// How long a release request waits for a claim under way, and between looks.
const WAIT: Duration = Duration::from_millis(1_500);
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// Where one client id's claim stands.
#[derive(Debug, Clone, Copy)]
enum Stage {
    /// Under way: its answer is not posted yet; `waiter`: the ticket of the one claim of the
    /// id that may wait for it (0: none).
    Claiming { waiter: u64 },
    /// Won: its answer went to `shard` at `at`.
    Answered { shard: ShardId, at: Instant },
}

/// The client ids this node is claiming or claimed a moment ago.
#[derive(Debug, Default)]
pub(super) struct Claiming {
    ids: Mutex<HashMap<String, Stage>>,
    /// The last ticket handed to a waiting claim.
    tickets: AtomicU64,
}

impl Claiming {
    /// A claim of `client_id` starts once an earlier claim of it here is answered, waiting
    /// until `deadline` at the latest; whether it started (if not, the caller answers it
    /// without calling [`Self::answered`]). Why: a CONNECT whose claim outlasted
    /// `connection.connect_timeout` is closed, and the client's next CONNECT, claimed beside
    /// it, found the session not installed yet and began an empty one (a CI run: the earlier
    /// claim had the session released to it and installed it only later). One claim of an id
    /// waits at a time, the latest (the last CONNECT wins): an earlier one still waiting gives
    /// up, so that a client reconnecting in a loop holds no more than two of the node's
    /// `CONCURRENT_CLAIMS`.
    pub(super) async fn begin(&self, client_id: &str, deadline: Instant) -> bool {
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed) + 1;
        loop {
            match self.try_begin(client_id, ticket) {
                Some(started) => return started,
                None if Instant::now() >= deadline => return false,
                None => tokio::time::sleep(LOOK_EVERY).await,
            }
        }
    }

    /// One look of [`Self::begin`]: started (`true`), given up to a later waiter (`false`), or
    /// still waiting (`None`, the waiter now being `ticket` if none later is).
    fn try_begin(&self, client_id: &str, ticket: u64) -> Option<bool> {
        let mut ids = self.lock();
        match ids.get_mut(client_id) {
            Some(Stage::Claiming { waiter }) if *waiter > ticket => Some(false),
            Some(Stage::Claiming { waiter }) => {
                *waiter = ticket;
                None
            }
            _ => {
                ids.retain(|_, stage| match stage {
                    Stage::Claiming { .. } => true,
                    Stage::Answered { at, .. } => at.elapsed() < KEEP,
                });
                if ids.len() < MAX_REMEMBERED {
                    ids.insert(client_id.to_owned(), Stage::Claiming { waiter: 0 });
                }
                Some(true)
            }
        }
    }

    /// The claim's answer was posted to `shard`; `won`: this node owns the id now.
    pub(super) fn answered(&self, client_id: &str, shard: ShardId, won: bool) {
        let mut ids = self.lock();
        match won {
            true => {
                if let Some(stage) = ids.get_mut(client_id) {
                    *stage = Stage::Answered {
                        shard,
                        at: Instant::now(),
                    };
                }
            }
            false => {
                ids.remove(client_id);
            }
        }
    }

    /// The shard a release request for `client_id` goes to: the one where a CONNECT that
    /// claimed it a moment ago is (once its claim is answered), or `None`.
    pub(super) async fn shard_for(&self, client_id: &str) -> Option<ShardId> {
        let deadline = Instant::now() + WAIT;
        loop {
            let stage = self.lock().get(client_id).copied();
            match stage {
                None => return None,
                Some(Stage::Answered { shard, at }) => {
                    return (at.elapsed() < KEEP).then_some(shard);
                }
                Some(Stage::Claiming { .. }) if Instant::now() >= deadline => return None,
                Some(Stage::Claiming { .. }) => tokio::time::sleep(LOOK_EVERY).await,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stage>> {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_release_goes_to_the_shard_of_a_claim_just_won() {
        let claiming = Claiming::default();
        assert_eq!(claiming.shard_for("a").await, None);
        let later = Instant::now() + Duration::from_secs(30);
        assert!(claiming.begin("a", later).await);
        claiming.answered("a", ShardId::new(3), true);
        assert_eq!(claiming.shard_for("a").await, Some(ShardId::new(3)));
        assert!(claiming.begin("b", later).await);
        claiming.answered("b", ShardId::new(1), false);
        assert_eq!(
            claiming.shard_for("b").await,
            None,
            "a lost claim is forgotten"
        );
    }

    #[tokio::test]
    async fn a_release_waits_for_a_claim_under_way() {
        let claiming = Arc::new(Claiming::default());
        assert!(claiming.begin("c", Instant::now()).await);
        let answering = Arc::clone(&claiming);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            answering.answered("c", ShardId::new(2), true);
        });
        assert_eq!(claiming.shard_for("c").await, Some(ShardId::new(2)));
    }

    #[tokio::test]
    async fn a_claim_starts_once_the_earlier_claim_of_its_id_is_answered() {
        let claiming = Arc::new(Claiming::default());
        assert!(claiming.begin("d", Instant::now()).await);
        let soon = Instant::now() + Duration::from_millis(30);
        assert!(
            !claiming.begin("d", soon).await,
            "not while the first is under way"
        );
        assert!(claiming.begin("e", Instant::now()).await, "other ids go on");
        let first = Arc::clone(&claiming);
        let earlier = tokio::spawn(async move {
            let later = Instant::now() + Duration::from_secs(30);
            first.begin("d", later).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let answering = Arc::clone(&claiming);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            answering.answered("d", ShardId::new(0), true);
        });
        let later = Instant::now() + Duration::from_secs(30);
        assert!(claiming.begin("d", later).await, "once it is answered");
        assert!(
            !earlier.await.unwrap(),
            "an earlier waiter gives up to the later one"
        );
    }
}
