//! Echo suppression towards a 3.1.1 remote that does not know the bridge marker: such a
//! remote has no No Local, so a message the bridge sends out on a topic it also brings in comes
//! straight back. The bridge remembers what it sent (topic and payload digests, for a while)
//! and drops the first identical message that comes back.

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// Most messages remembered.
const CAPACITY: usize = 4096;
/// How long a sent message is waited for.
const HOLD: Duration = Duration::from_secs(60);

/// Digests of messages sent out that may come back.
#[derive(Default)]
pub(crate) struct EchoGuard {
    sent: VecDeque<(u64, Instant)>,
}

impl EchoGuard {
    /// The bridge sent `payload` on `topic` to the remote.
    pub(crate) fn sent(&mut self, topic: &str, payload: &[u8], now: Instant) {
        self.expire(now);
        if self.sent.len() == CAPACITY {
            self.sent.pop_front();
        }
        self.sent.push_back((digest(topic, payload), now));
    }

    /// Whether a message arriving from the remote is one the bridge sent (forgotten then:
    /// a second identical message is not an echo).
    pub(crate) fn is_echo(&mut self, topic: &str, payload: &[u8], now: Instant) -> bool {
        self.expire(now);
        let digest = digest(topic, payload);
        match self.sent.iter().position(|(d, _)| *d == digest) {
            Some(index) => {
                self.sent.remove(index);
                true
            }
            None => false,
        }
    }

    fn expire(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) > HOLD)
        {
            self.sent.pop_front();
        }
    }
}

fn digest(topic: &str, payload: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    topic.hash(&mut hasher);
    payload.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sent_message_comes_back_once_as_an_echo() {
        let now = Instant::now();
        let mut guard = EchoGuard::default();
        guard.sent("both/a", b"1", now);
        assert!(!guard.is_echo("both/a", b"2", now), "another payload");
        assert!(!guard.is_echo("both/b", b"1", now), "another topic");
        assert!(guard.is_echo("both/a", b"1", now));
        assert!(!guard.is_echo("both/a", b"1", now), "only once");
    }

    #[test]
    fn old_messages_are_forgotten() {
        let now = Instant::now();
        let mut guard = EchoGuard::default();
        guard.sent("t", b"x", now);
        assert!(!guard.is_echo("t", b"x", now + HOLD * 2));
    }
}
