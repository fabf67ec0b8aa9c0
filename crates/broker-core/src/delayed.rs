//! Delayed publish (EMQX's `$delayed/{seconds}/{topic}`, `[delayed]`, off by default).
//!
//! A client's PUBLISH to `$delayed/15/sensors/a` is not routed at once: the shard that
//! received it keeps it and, 15 seconds later, publishes it to `sensors/a` as the broker, through
//! the same path as any PUBLISH (`shard/delayed.rs`). This module holds what is not the shard's:
//! the topic parser ([`parse_delayed`]) and the broker-wide bound and id counter
//! ([`DelayedPublish`], in `Shared`).
//!
//! Design: the shard that received a delayed message owns it until it fires or is cancelled;
//! its timer book arms one timer per message. Ids carry that shard's index in their low 16
//! bits ([`DelayedPublish::next_id`]), so the admin API's cancel asks exactly that shard.
//! Pending messages are kept in memory only: they do not survive a restart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ring_runtime::ShardId;

use crate::settings::DelayedSettings;

/// The prefix that asks for a delayed publish.
pub const DELAYED_PREFIX: &str = "$delayed/";

/// EMQX's largest delay, in seconds (also `delayed.max_delay_seconds`' ceiling).
pub use crate::settings::MAX_DELAY_SECONDS;

/// A `$delayed/` topic taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedTopic<'a> {
    /// How long the message waits.
    pub delay: Duration,
    /// Where it is published when it fires.
    pub target: &'a str,
}

/// Why a `$delayed/` topic is refused (0x90 Topic Name invalid).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelayedTopicError {
    #[error("delayed publish: the delay {0:?} is not a whole number of seconds")]
    NotSeconds(String),
    #[error("delayed publish: a delay of {seconds} s is over the maximum of {max} s")]
    TooLong { seconds: u64, max: u32 },
    #[error("delayed publish: no target topic after the delay")]
    EmptyTarget,
    #[error("delayed publish: the target topic {0:?} holds a wildcard")]
    WildcardTarget(String),
    #[error("delayed publish: the target topic {0:?} is itself delayed")]
    NestedTarget(String),
}

/// `topic` taken apart when it starts with [`DELAYED_PREFIX`]; `Ok(None)` for any other topic.
pub fn parse_delayed(
    topic: &str,
    max_delay_seconds: u32,
) -> Result<Option<DelayedTopic<'_>>, DelayedTopicError> {
    let Some(rest) = topic.strip_prefix(DELAYED_PREFIX) else {
        return Ok(None);
    };
    let (seconds, target) = rest.split_once('/').unwrap_or((rest, ""));
    let seconds = parse_seconds(seconds)?;
    if seconds > u64::from(max_delay_seconds) {
        return Err(DelayedTopicError::TooLong {
            seconds,
            max: max_delay_seconds,
        });
    }
    check_target(target)?;
    Ok(Some(DelayedTopic {
        delay: Duration::from_secs(seconds),
        target,
    }))
}

/// Decimal digits only (no sign, no spaces), at most 20 of them.
fn parse_seconds(text: &str) -> Result<u64, DelayedTopicError> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    match digits {
        true => text.parse::<u64>().or(Ok(u64::MAX)),
        false => Err(DelayedTopicError::NotSeconds(text.to_owned())),
    }
}

fn check_target(target: &str) -> Result<(), DelayedTopicError> {
    if target.is_empty() {
        return Err(DelayedTopicError::EmptyTarget);
    }
    if target.contains(['+', '#']) {
        return Err(DelayedTopicError::WildcardTarget(target.to_owned()));
    }
    if target.starts_with(DELAYED_PREFIX) {
        return Err(DelayedTopicError::NestedTarget(target.to_owned()));
    }
    Ok(())
}

/// The broker-wide side of delayed publish: the settings, the bound on pending messages, and
/// the id counter.
#[derive(Debug)]
pub struct DelayedPublish {
    pub settings: DelayedSettings,
    pending: AtomicU64,
    next_seq: AtomicU64,
}

impl DelayedPublish {
    pub fn new(settings: DelayedSettings) -> Self {
        Self {
            settings,
            pending: AtomicU64::new(0),
            next_seq: AtomicU64::new(1),
        }
    }

    /// `topic` taken apart, when delayed publish is on and `topic` asks for it.
    pub fn parse<'a>(&self, topic: &'a str) -> Result<Option<DelayedTopic<'a>>, DelayedTopicError> {
        match self.settings.enabled {
            true => parse_delayed(topic, self.settings.max_delay_seconds),
            false => Ok(None),
        }
    }

    /// Takes one place under `max_messages`; false when every place is taken.
    pub fn try_reserve(&self) -> bool {
        let max = u64::from(self.settings.max_messages);
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Gives back a place taken with [`Self::try_reserve`] (the message fired or was cancelled).
    pub fn release(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Messages pending now, broker-wide.
    pub fn pending(&self) -> u64 {
        self.pending.load(Ordering::Acquire)
    }

    /// A new id for a message kept by `shard`: unique broker-wide, the shard in its low 16 bits.
    pub fn next_id(&self, shard: ShardId) -> u64 {
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        (seq << 16) | u64::from(shard.index() as u16)
    }

    /// The shard that keeps the message `id`.
    pub fn shard_of(id: u64) -> ShardId {
        ShardId::new((id & 0xffff) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u32 = MAX_DELAY_SECONDS;

    fn delayed(topic: &str) -> DelayedTopic<'_> {
        parse_delayed(topic, MAX).unwrap().unwrap()
    }

    #[test]
    fn a_delayed_topic_gives_its_delay_and_target() {
        let parsed = delayed("$delayed/15/sensors/a");
        assert_eq!(parsed.delay, Duration::from_secs(15));
        assert_eq!(parsed.target, "sensors/a");
        assert_eq!(delayed("$delayed/0/x").delay, Duration::ZERO);
        assert_eq!(delayed("$delayed/4294967/x").delay.as_secs(), 4_294_967);
        assert_eq!(delayed("$delayed/1/$SYS/x").target, "$SYS/x");
        assert_eq!(delayed("$delayed/1//lead").target, "/lead");
    }

    #[test]
    fn other_topics_are_not_delayed() {
        for topic in [
            "sensors/a",
            "$delayed",
            "$delayedx/1/a",
            "delayed/1/a",
            "$SYS/x",
        ] {
            assert_eq!(parse_delayed(topic, MAX), Ok(None), "{topic}");
        }
    }

    #[test]
    fn a_delay_that_is_not_whole_seconds_is_refused() {
        for topic in [
            "$delayed/x/a",
            "$delayed/-1/a",
            "$delayed/+1/a",
            "$delayed/1.5/a",
            "$delayed/ 1/a",
            "$delayed//a",
            "$delayed/",
        ] {
            let refused = parse_delayed(topic, MAX);
            assert!(
                matches!(refused, Err(DelayedTopicError::NotSeconds(_))),
                "{topic}: {refused:?}"
            );
        }
    }

    #[test]
    fn a_delay_over_the_maximum_is_refused() {
        assert_eq!(
            parse_delayed("$delayed/4294968/a", MAX),
            Err(DelayedTopicError::TooLong {
                seconds: 4_294_968,
                max: MAX
            })
        );
        assert!(parse_delayed("$delayed/61/a", 60).is_err());
        assert!(parse_delayed("$delayed/60/a", 60).unwrap().is_some());
        let huge = "$delayed/99999999999999999999999/a";
        assert!(matches!(
            parse_delayed(huge, MAX),
            Err(DelayedTopicError::TooLong { .. })
        ));
    }

    #[test]
    fn an_empty_wildcard_or_delayed_target_is_refused() {
        assert_eq!(
            parse_delayed("$delayed/5", MAX),
            Err(DelayedTopicError::EmptyTarget)
        );
        assert_eq!(
            parse_delayed("$delayed/5/", MAX),
            Err(DelayedTopicError::EmptyTarget)
        );
        for topic in ["$delayed/5/a/+", "$delayed/5/#", "$delayed/5/a+b"] {
            assert!(
                matches!(
                    parse_delayed(topic, MAX),
                    Err(DelayedTopicError::WildcardTarget(_))
                ),
                "{topic}"
            );
        }
        assert!(matches!(
            parse_delayed("$delayed/5/$delayed/5/a", MAX),
            Err(DelayedTopicError::NestedTarget(_))
        ));
    }

    fn settings(enabled: bool, max_messages: u32) -> DelayedSettings {
        DelayedSettings {
            enabled,
            max_messages,
            max_delay_seconds: MAX,
        }
    }

    #[test]
    fn off_nothing_is_delayed() {
        let off = DelayedPublish::new(settings(false, 10));
        assert_eq!(off.parse("$delayed/5/a"), Ok(None));
        assert_eq!(off.parse("$delayed/x/a"), Ok(None));
        let on = DelayedPublish::new(settings(true, 10));
        assert!(on.parse("$delayed/5/a").unwrap().is_some());
    }

    #[test]
    fn the_bound_holds_places_until_they_are_given_back() {
        let delayed = DelayedPublish::new(settings(true, 2));
        assert!(delayed.try_reserve());
        assert!(delayed.try_reserve());
        assert!(!delayed.try_reserve());
        assert_eq!(delayed.pending(), 2);
        delayed.release();
        assert!(delayed.try_reserve());
        delayed.release();
        delayed.release();
        delayed.release();
        assert_eq!(delayed.pending(), 0, "never below zero");
    }

    #[test]
    fn ids_are_unique_and_name_their_shard() {
        let delayed = DelayedPublish::new(settings(true, 2));
        let a = delayed.next_id(ShardId::new(3));
        let b = delayed.next_id(ShardId::new(3));
        let c = delayed.next_id(ShardId::new(0));
        assert_ne!(a, b);
        assert_eq!(DelayedPublish::shard_of(a), ShardId::new(3));
        assert_eq!(DelayedPublish::shard_of(c), ShardId::new(0));
    }
}
