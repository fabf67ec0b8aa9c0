//! Delayed publish (EMQX's `$delayed/{seconds}/{topic}`, `[delayed]`, off by default).
//!
//! A client's PUBLISH to `$delayed/15/sensors/a` is not routed at once: the shard that
//! received it keeps it and, 15 seconds later, publishes it to `sensors/a` as the broker, through
//! the same path as any PUBLISH (`shard/delayed.rs`). This module holds what is not the shard's:
//! the topic parser ([`parse_delayed`]) and the broker-wide bound and id counter
//! ([`DelayedPublish`], in `Shared`).
//!
//! Design: the shard that received a delayed message owns it until it fires or is cancelled;
//! its timer book arms one timer per message. Ids come from one broker-wide counter
//! ([`DelayedPublish::next_id`]); the admin API's cancel asks every shard. With `[persistence]`
//! each pending message is stored (`SessionWrite::DelayedSet`, cleared when it fires or is
//! cancelled) in the receiving turn's batch, so a QoS 1/2 PUBLISH is acknowledged once it is
//! durable (`shard/durable.rs`). After a restart the stored ones are dealt to the shards in
//! turn, like recovered sessions ([`deal_delayed`]), and fire when due (at once when their time
//! passed while the broker was down), also with `delayed.enabled` now off; the id counter
//! starts above them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use session_store::storage::StoredDelayed;

use crate::settings::DelayedSettings;
use crate::store::Recovery;

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

impl Default for DelayedPublish {
    /// Off, with the default bounds.
    fn default() -> Self {
        Self::new(DelayedSettings::default())
    }
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

    /// A new id, unique broker-wide (above every recovered one).
    pub fn next_id(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes a place for a recovered message (accepted before the restart: never refused, even
    /// over `max_messages`), and keeps new ids above its `id`.
    fn recovered(&self, id: u64) {
        self.pending.fetch_add(1, Ordering::AcqRel);
        self.next_seq
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
    }
}

/// Start-up: deals the recovered delayed messages to `shards` shards in turn (held in
/// `recovery` until each shard takes its share), counting them under the bound.
pub fn deal_delayed(
    recovery: &Recovery,
    delayed: &DelayedPublish,
    recovered: Vec<(u64, StoredDelayed)>,
    shards: usize,
) {
    let shards = shards.max(1);
    let mut dealt: Vec<Vec<(u64, StoredDelayed)>> = (0..shards).map(|_| Vec::new()).collect();
    for (index, (id, stored)) in recovered.into_iter().enumerate() {
        delayed.recovered(id);
        dealt[index % shards].push((id, stored));
    }
    recovery.hold_delayed(dealt);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring_runtime::ShardId;

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

    fn stored(due_secs: u64) -> StoredDelayed {
        StoredDelayed {
            due: std::time::UNIX_EPOCH + Duration::from_secs(due_secs),
            publisher: codec::MqttStr::try_from("p").unwrap(),
            message: session_store::storage::StoredMessage {
                topic: bytes::Bytes::from_static(b"t"),
                payload: bytes::Bytes::new(),
                qos: codec::QoS::AtLeastOnce,
                retain: false,
                properties: bytes::Bytes::new(),
                expires_at: None,
                sub_ids: Vec::new(),
                accepted_at: None,
                key: 0,
            },
        }
    }

    #[test]
    fn recovered_messages_are_dealt_in_turn_counted_and_ids_go_on_above_them() {
        let delayed = DelayedPublish::new(settings(true, 2));
        let recovery = Recovery::default();
        let recovered = vec![(4, stored(1)), (9, stored(2)), (5, stored(3))];
        deal_delayed(&recovery, &delayed, recovered, 2);
        assert_eq!(
            delayed.pending(),
            3,
            "over the bound: accepted before the restart"
        );
        assert!(!delayed.try_reserve());
        assert_eq!(delayed.next_id(), 10);
        assert_ne!(delayed.next_id(), 10);
        let first: Vec<u64> = (recovery
            .take_delayed(ShardId::new(0))
            .iter()
            .map(|(id, _)| *id))
        .collect();
        let second: Vec<u64> = (recovery
            .take_delayed(ShardId::new(1))
            .iter()
            .map(|(id, _)| *id))
        .collect();
        assert_eq!((first, second), (vec![4, 5], vec![9]));
        assert!(
            recovery.take_delayed(ShardId::new(0)).is_empty(),
            "taken once"
        );
    }
}
