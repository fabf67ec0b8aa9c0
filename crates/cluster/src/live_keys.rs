//! The keys of the messages NATS delivered to this node while the sessions it recovered from
//! its store catch up (docs/cluster.md, "When a node restarts"): the catch-up's read of the
//! replay stream reaches past the moment those sessions' subscriptions went live, and the
//! messages of that overlap reached them live already (every message posted to the shards is
//! routed to every matching local session), so the catch-up leaves them out. Noted from the
//! start until the catch-up ends, at most [`MAX_KEYS`] (beyond it the overlap's QoS 2
//! messages may come twice, logged).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use tracing::warn;

/// The most keys noted (a catch-up lasts seconds: at 50,000 messages a second, 5 s).
const MAX_KEYS: usize = 1 << 18;

/// Keys noted while noting.
#[derive(Debug)]
pub(crate) struct LiveKeys(Mutex<Option<HashSet<u64>>>);

impl Default for LiveKeys {
    fn default() -> Self {
        Self(Mutex::new(Some(HashSet::new())))
    }
}

impl LiveKeys {
    /// Notes the keys of messages posted to the shards (0: none, skipped).
    pub(crate) fn note(&self, keys: impl IntoIterator<Item = u64>) {
        let mut noted = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(set) = noted.as_mut() else {
            return;
        };
        for key in keys.into_iter().filter(|key| *key != 0) {
            if set.len() >= MAX_KEYS {
                warn!(
                    MAX_KEYS,
                    "cluster: too many messages during the catch-up after a restart to remember them all; QoS 2 ones among the last may reach the recovered sessions twice"
                );
                *noted = None;
                return;
            }
            set.insert(key);
        }
    }

    /// Whether keys are noted now.
    pub(crate) fn noting(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// The keys noted so far.
    pub(crate) fn noted(&self) -> HashSet<u64> {
        let noted = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        noted.clone().unwrap_or_default()
    }

    /// The catch-up ended: nothing more is noted, and the keys go.
    pub(crate) fn stop(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_noted_until_stopped() {
        let live = LiveKeys::default();
        assert!(live.noting());
        live.note([1, 0, 2]);
        assert_eq!(live.noted(), HashSet::from([1, 2]));
        live.stop();
        assert!(!live.noting());
        live.note([3]);
        assert!(live.noted().is_empty());
    }
}
