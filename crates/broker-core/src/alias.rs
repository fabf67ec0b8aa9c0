//! MQTT 5.0 topic aliases, both directions, each bounded by the Topic Alias Maximum in force.

use std::collections::HashMap;
use std::num::NonZeroU16;

use bytes::Bytes;
use codec::TopicAliasUse;

/// Why an inbound alias was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    /// Alias 0 or above our Topic Alias Maximum: Topic Alias Invalid (0x94, MQTT 5.0 3.3.2.3.4).
    #[error("topic alias {alias} is outside 1..={max}")]
    OutOfRange { alias: u16, max: u16 },
    /// An empty topic with an alias that was never set: a Protocol Error (0x82, MQTT 5.0
    /// 3.3.4).
    #[error("topic alias {0} was never set")]
    Unknown(u16),
}

impl AliasError {
    /// The reason code the client is disconnected with.
    pub fn reason_code(self) -> codec::ReasonCode {
        match self {
            Self::OutOfRange { .. } => codec::ReasonCode::TopicAliasInvalid,
            Self::Unknown(_) => codec::ReasonCode::ProtocolError,
        }
    }
}

/// The aliases a client has set towards us.
#[derive(Debug, Default)]
pub struct InboundAliases {
    max: u16,
    topics: Vec<Option<Bytes>>,
}

impl InboundAliases {
    /// A table for our Topic Alias Maximum `max` (0 = aliases not allowed).
    pub fn new(max: u16) -> Self {
        Self {
            max,
            topics: Vec::new(),
        }
    }

    fn slot(&self, alias: u16) -> Result<usize, AliasError> {
        if alias == 0 || alias > self.max {
            return Err(AliasError::OutOfRange {
                alias,
                max: self.max,
            });
        }
        Ok(usize::from(alias - 1))
    }

    /// Resolves a PUBLISH's topic: a non-empty topic with an alias sets the alias; an empty topic
    /// uses the alias set before.
    pub fn resolve(&mut self, topic: &Bytes, alias: u16) -> Result<Bytes, AliasError> {
        let slot = self.slot(alias)?;
        if topic.is_empty() {
            return self
                .topics
                .get(slot)
                .and_then(Clone::clone)
                .ok_or(AliasError::Unknown(alias));
        }
        if self.topics.len() <= slot {
            self.topics.resize(slot + 1, None);
        }
        self.topics[slot] = Some(topic.clone());
        Ok(topic.clone())
    }
}

/// How an outgoing PUBLISH names its topic to one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutboundTopic {
    /// No alias: send the topic.
    Plain,
    /// Send the topic and set this alias (first use, or a reassigned slot).
    SetAlias(u16),
    /// Send an empty topic with this alias.
    UseAlias(u16),
}

impl OutboundTopic {
    /// The codec's framing instruction for this decision (`None`: no alias).
    pub fn alias_use(self) -> Option<TopicAliasUse> {
        match self {
            Self::Plain => None,
            Self::SetAlias(alias) => NonZeroU16::new(alias).map(TopicAliasUse::Establish),
            Self::UseAlias(alias) => NonZeroU16::new(alias).map(TopicAliasUse::Reuse),
        }
    }
}

/// The aliases we use towards one client, at most `max` (the lower of the client's Topic Alias
/// Maximum and our configured outbound maximum). When full, the least recently used is reassigned.
#[derive(Debug, Default)]
pub struct OutboundAliases {
    max: u16,
    clock: u64,
    by_topic: HashMap<Bytes, (u16, u64)>,
    by_alias: Vec<Bytes>,
}

impl OutboundAliases {
    /// A table for at most `max` aliases (0 = never alias).
    pub fn new(max: u16) -> Self {
        Self {
            max,
            ..Self::default()
        }
    }

    /// Chooses how to name `topic` in the next PUBLISH to this client.
    pub fn assign(&mut self, topic: &Bytes) -> OutboundTopic {
        if self.max == 0 {
            return OutboundTopic::Plain;
        }
        self.clock += 1;
        if let Some((alias, used)) = self.by_topic.get_mut(topic) {
            *used = self.clock;
            return OutboundTopic::UseAlias(*alias);
        }
        let alias = if self.by_alias.len() < usize::from(self.max) {
            self.by_alias.push(topic.clone());
            u16::try_from(self.by_alias.len()).expect("invariant: len <= max (u16)")
        } else {
            self.evict_least_recent(topic)
        };
        self.by_topic.insert(topic.clone(), (alias, self.clock));
        OutboundTopic::SetAlias(alias)
    }

    /// Frees the least recently used alias and gives it to `topic`.
    fn evict_least_recent(&mut self, topic: &Bytes) -> u16 {
        let (old_topic, alias) = self
            .by_topic
            .iter()
            .min_by_key(|(_, (_, used))| *used)
            .map(|(t, (a, _))| (t.clone(), *a))
            .expect("invariant: table is full, so not empty");
        self.by_topic.remove(&old_topic);
        self.by_alias[usize::from(alias - 1)] = topic.clone();
        alias
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    #[test]
    fn inbound_alias_set_then_used() {
        let mut a = InboundAliases::new(2);
        assert_eq!(a.resolve(&t("a/b"), 1), Ok(t("a/b")));
        assert_eq!(a.resolve(&t(""), 1), Ok(t("a/b")));
        assert_eq!(
            a.resolve(&t("c"), 1),
            Ok(t("c")),
            "an alias can be remapped"
        );
        assert_eq!(a.resolve(&t(""), 1), Ok(t("c")));
        assert_eq!(a.resolve(&t(""), 2), Err(AliasError::Unknown(2)));
        assert_eq!(
            a.resolve(&t("x"), 3),
            Err(AliasError::OutOfRange { alias: 3, max: 2 })
        );
        assert!(a.resolve(&t("x"), 0).is_err());
    }

    #[test]
    fn inbound_aliases_refused_when_max_is_zero() {
        let mut a = InboundAliases::new(0);
        assert!(a.resolve(&t("a"), 1).is_err());
    }

    #[test]
    fn outbound_aliases_are_reused_and_lru_evicted() {
        let mut a = OutboundAliases::new(2);
        assert_eq!(a.assign(&t("a")), OutboundTopic::SetAlias(1));
        assert_eq!(a.assign(&t("b")), OutboundTopic::SetAlias(2));
        assert_eq!(a.assign(&t("a")), OutboundTopic::UseAlias(1));
        // "b" is least recently used now: "c" takes its alias.
        assert_eq!(a.assign(&t("c")), OutboundTopic::SetAlias(2));
        assert_eq!(a.assign(&t("c")), OutboundTopic::UseAlias(2));
        assert_eq!(a.assign(&t("b")), OutboundTopic::SetAlias(1));
    }

    #[test]
    fn outbound_plain_when_disabled() {
        let mut a = OutboundAliases::new(0);
        assert_eq!(a.assign(&t("a")), OutboundTopic::Plain);
    }
}
