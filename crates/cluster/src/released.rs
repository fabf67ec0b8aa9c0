//! Sessions this node released to another node a moment ago (docs/cluster.md, "Sessions
//! across nodes"). A release ends the session here before its reply leaves: when the reply
//! does not reach the claiming node in time (a NATS server restarting, JetStream stalled), that
//! node finds this one alive and refuses its CONNECT (0x88), and the session, its queue
//! included, would be gone: the next claim would find none (Session Present 0). So the
//! snapshot is kept for [`KEEP`] and served again while the owner record still names this run:
//! to the next release request (whose claim read the record naming this run), or to a CONNECT
//! here. Two claims holding it then race on the record with compare-and-set, and the loser
//! drops its copy: one copy remains.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;

/// How long a released session's snapshot is kept: beyond a claim's time (the CONNECT's
/// `connection.connect_timeout`, 10 s by default) and the client's next attempt.
pub(super) const KEEP: Duration = Duration::from_secs(15);

/// One released snapshot, when it was kept (and by the wall clock, where a follow-up of its
/// return here reads from).
#[derive(Debug)]
struct Kept {
    snapshot: Bytes,
    at: Instant,
    released_at: SystemTime,
}

/// The snapshots released a moment ago, by client id.
#[derive(Debug, Default)]
pub(super) struct Released(Mutex<HashMap<String, Kept>>);

impl Released {
    /// `client_id`'s session was released with `snapshot`.
    pub(super) fn keep(&self, client_id: &str, snapshot: Bytes) {
        let mut kept = self.lock();
        kept.retain(|_, kept| kept.at.elapsed() < KEEP);
        let released = Kept {
            snapshot,
            at: Instant::now(),
            released_at: SystemTime::now(),
        };
        kept.insert(client_id.to_owned(), released);
    }

    /// The snapshot `client_id`'s session was released with, and when, if that was less than
    /// [`KEEP`] ago (still kept: the claim it goes to may lose the record too).
    pub(super) fn again_since(&self, client_id: &str) -> Option<(Bytes, SystemTime)> {
        let kept = self.lock();
        let kept = kept.get(client_id)?;
        (kept.at.elapsed() < KEEP).then(|| (kept.snapshot.clone(), kept.released_at))
    }

    /// `client_id`'s released snapshot is of no use any more (the session is here again, or
    /// the client started afresh).
    pub(super) fn forget(&self, client_id: &str) {
        self.lock().remove(client_id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_snapshot_is_served_again_until_forgotten() {
        let released = Released::default();
        let again = |id| released.again_since(id).map(|(snapshot, _)| snapshot);
        assert_eq!(again("a"), None);
        released.keep("a", Bytes::from_static(b"s"));
        assert_eq!(again("a"), Some(Bytes::from_static(b"s")));
        assert_eq!(again("a"), Some(Bytes::from_static(b"s")), "kept");
        assert_eq!(again("b"), None);
        released.forget("a");
        assert_eq!(again("a"), None);
    }
}
