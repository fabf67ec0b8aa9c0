//! This node's writes to the retained bucket not yet settled (docs/cluster.md, "Retained
//! messages"). While one awaits JetStream's acknowledgement, the watch's entries for its topic
//! are held back (an older one would replace the newer local message for a moment). Once the
//! topic's last write settled, the newest entry held back is applied when the bucket kept it
//! at or after this node's last kept write (its revision is not below theirs: it is the
//! bucket's newest record known here, this node's own included, which also repairs a local
//! value that an entry applied just before a local publish overwrote); an older one is dropped
//! (the node's own record comes later in the watch and is applied then). A write that failed
//! with nothing newer held back has the topic read back.

use std::collections::HashMap;

use super::ClusterPublish;

/// Per topic, this node's writes to the bucket awaiting JetStream's acknowledgement, and the
/// newest entry held back meanwhile (bounded by the writes in flight).
#[derive(Debug, Default)]
pub(super) struct Pending {
    writes: HashMap<String, PendingTopic>,
}

#[derive(Debug, Default)]
struct PendingTopic {
    unacknowledged: u32,
    /// The highest bucket revision (stream sequence) of this node's writes kept so far.
    newest_kept: u64,
    /// A write was not kept: the local message may not be the bucket's.
    failed: bool,
    /// The newest entry of the watch held back, with its revision.
    held: Option<(u64, ClusterPublish)>,
}

/// What a topic's retained store takes once its last write settled.
#[derive(Debug)]
pub(super) enum AfterSettling {
    /// Nothing now: writes are still in flight, or the newest record of ours the bucket kept
    /// is still to come in the watch.
    Nothing,
    /// The entry held back: the bucket's newest record known here.
    Apply(ClusterPublish),
    /// The bucket's record, read now (a write failed: the local message may not be the
    /// bucket's, and no newer entry was held back).
    ReadBack,
}

impl Pending {
    /// One more write of `topic` sent.
    pub(super) fn sent(&mut self, topic: &str) {
        self.writes
            .entry(topic.to_owned())
            .or_default()
            .unacknowledged += 1;
    }

    /// One write of `topic` kept under `revision` (`None`: not kept); what the topic's store
    /// takes now.
    pub(super) fn settle(&mut self, topic: &str, revision: Option<u64>) -> AfterSettling {
        let Some(pending) = self.writes.get_mut(topic) else {
            return AfterSettling::Nothing;
        };
        match revision {
            Some(revision) => pending.newest_kept = pending.newest_kept.max(revision),
            None => pending.failed = true,
        }
        pending.unacknowledged = pending.unacknowledged.saturating_sub(1);
        if pending.unacknowledged > 0 {
            return AfterSettling::Nothing;
        }
        let Some(settled) = self.writes.remove(topic) else {
            return AfterSettling::Nothing;
        };
        match settled.held {
            Some((held, publish)) if held >= settled.newest_kept => AfterSettling::Apply(publish),
            _ if settled.failed => AfterSettling::ReadBack,
            _ => AfterSettling::Nothing,
        }
    }

    /// Holds back a watched entry of `topic` (bucket revision `revision`) while a write of ours
    /// awaits its acknowledgement; the entry back when nothing is pending (apply it now).
    pub(super) fn hold_back(
        &mut self,
        topic: &str,
        revision: u64,
        publish: ClusterPublish,
    ) -> Option<ClusterPublish> {
        let Some(pending) = self.writes.get_mut(topic) else {
            return Some(publish);
        };
        if pending
            .held
            .as_ref()
            .is_none_or(|(held, _)| revision > *held)
        {
            pending.held = Some((revision, publish));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(payload: &'static [u8]) -> ClusterPublish {
        ClusterPublish {
            topic: codec::MqttStr::try_from("t").unwrap(),
            payload: bytes::Bytes::from_static(payload),
            properties: bytes::Bytes::new(),
            qos: codec::QoS::AtLeastOnce,
            retain: true,
            expiry: None,
            scope: super::super::Scope::Retained,
            key: 0,
        }
    }

    /// What settling says, as text: `nothing`, `read back`, or the payload applied.
    fn said(after: AfterSettling) -> String {
        match after {
            AfterSettling::Nothing => "nothing".into(),
            AfterSettling::ReadBack => "read back".into(),
            AfterSettling::Apply(publish) => String::from_utf8(publish.payload.to_vec()).unwrap(),
        }
    }

    fn held(back: Option<ClusterPublish>) -> Option<Vec<u8>> {
        back.map(|publish| publish.payload.to_vec())
    }

    #[test]
    fn an_entry_applies_at_once_when_nothing_of_ours_is_pending() {
        let mut pending = Pending::default();
        assert_eq!(
            held(pending.hold_back("t", 1, entry(b"a"))),
            Some(b"a".to_vec())
        );
        assert_eq!(said(pending.settle("t", Some(2))), "nothing", "a stray one");
    }

    #[test]
    fn our_own_newest_entry_held_back_is_applied_once_our_writes_settle() {
        let mut pending = Pending::default();
        pending.sent("t");
        pending.sent("t");
        assert_eq!(held(pending.hold_back("t", 5, entry(b"ours"))), None);
        assert_eq!(said(pending.settle("t", Some(5))), "nothing", "one left");
        assert_eq!(held(pending.hold_back("t", 6, entry(b"ours too"))), None);
        assert_eq!(said(pending.settle("t", Some(6))), "ours too");
        assert_eq!(
            held(pending.hold_back("t", 7, entry(b"x"))),
            Some(b"x".to_vec())
        );
    }

    #[test]
    fn an_entry_older_than_our_last_kept_write_is_dropped() {
        let mut pending = Pending::default();
        pending.sent("t");
        assert_eq!(
            held(pending.hold_back("t", 3, entry(b"theirs, older"))),
            None
        );
        assert_eq!(said(pending.settle("t", Some(4))), "nothing");
    }

    #[test]
    fn a_newer_entry_held_back_applies_once_our_writes_settle() {
        let mut pending = Pending::default();
        pending.sent("t");
        assert_eq!(held(pending.hold_back("t", 9, entry(b"theirs"))), None);
        assert_eq!(held(pending.hold_back("t", 8, entry(b"ours"))), None);
        assert_eq!(said(pending.settle("t", Some(8))), "theirs");
    }

    #[test]
    fn a_failed_write_has_the_topic_read_back_unless_a_newer_entry_came() {
        let mut pending = Pending::default();
        pending.sent("t");
        pending.sent("t");
        assert_eq!(said(pending.settle("t", None)), "nothing", "one left");
        assert_eq!(said(pending.settle("t", Some(3))), "read back");
        pending.sent("t");
        assert_eq!(held(pending.hold_back("t", 4, entry(b"theirs"))), None);
        assert_eq!(said(pending.settle("t", None)), "theirs");
    }
}
