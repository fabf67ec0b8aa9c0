//! Local interest, counted per filter: one set of NATS subscriptions serves every local
//! subscription to a filter, taken at the first and dropped with the last.

use std::collections::HashMap;

use super::subject::{Root, filter_subjects, queue_group};
use super::{Interest, Scope};

/// The `$share/` prefix of a shared subscription's text.
const SHARE: &str = "$share/";

/// One NATS subscription a filter needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSubscription {
    /// The subject (with NATS wildcards).
    pub subject: String,
    /// The queue group, for a shared subscription.
    pub queue: Option<String>,
    /// Which local subscribers its messages are for.
    pub scope: Scope,
}

/// What a change of interest asks of the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The first local subscription to the filter: take these NATS subscriptions.
    Subscribe(Vec<NatsSubscription>),
    /// The last one went: drop the filter's NATS subscriptions.
    Unsubscribe,
    /// Nothing changes on NATS.
    Nothing,
}

/// Local subscriptions per filter text.
#[derive(Debug, Default)]
pub struct InterestTable {
    counts: HashMap<String, u64>,
}

impl InterestTable {
    /// Applies one change; what to do on NATS for `change.filter`.
    pub fn apply(&mut self, prefix: &str, change: &Interest) -> Action {
        let count = self.counts.entry(change.filter.clone()).or_insert(0);
        let before = *count;
        *count = count.saturating_add_signed(i64::from(change.delta));
        let after = *count;
        if after == 0 {
            self.counts.remove(&change.filter);
        }
        match (before, after) {
            (0, 1..) => Action::Subscribe(nats_subscriptions(prefix, &change.filter)),
            (1.., 0) => Action::Unsubscribe,
            _ => Action::Nothing,
        }
    }

    /// Filters with at least one local subscription.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.counts.len()
    }
}

/// The NATS subscriptions for one filter text: plain subjects for a plain filter, queue
/// subscriptions named after the share for `$share/group/filter`; none for `$SYS` (each node
/// publishes its own).
pub fn nats_subscriptions(prefix: &str, filter: &str) -> Vec<NatsSubscription> {
    let (topic_filter, queue, scope) = match filter.strip_prefix(SHARE) {
        Some(rest) => {
            let Some((_group, topic_filter)) = rest.split_once('/') else {
                return Vec::new();
            };
            let scope = Scope::Group(filter.into());
            (topic_filter, Some(queue_group(filter)), scope)
        }
        None => (filter, None, Scope::Plain),
    };
    if topic_filter.starts_with("$SYS") {
        return Vec::new();
    }
    Root::BOTH
        .into_iter()
        .flat_map(|root| filter_subjects(prefix, root, topic_filter))
        .map(|subject| NatsSubscription {
            subject,
            queue: queue.clone(),
            scope: scope.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(filter: &str, delta: i32) -> Interest {
        Interest {
            filter: filter.to_owned(),
            delta,
        }
    }

    #[test]
    fn the_first_subscribes_and_the_last_unsubscribes() {
        let mut table = InterestTable::default();
        assert!(
            matches!(table.apply("r", &change("a/#", 1)), Action::Subscribe(s) if s.len() == 4)
        );
        assert_eq!(table.apply("r", &change("a/#", 1)), Action::Nothing);
        assert_eq!(table.apply("r", &change("a/#", -1)), Action::Nothing);
        assert_eq!(table.apply("r", &change("a/#", -1)), Action::Unsubscribe);
        assert_eq!(table.len(), 0);
        // A stray removal changes nothing.
        assert_eq!(table.apply("r", &change("a/#", -1)), Action::Nothing);
    }

    #[test]
    fn a_share_is_a_queue_subscription() {
        let subs = nats_subscriptions("r", "$share/g/a/+");
        let share = |subject: &str| NatsSubscription {
            subject: subject.into(),
            queue: Some("$share/g/a/+".into()),
            scope: Scope::Group("$share/g/a/+".into()),
        };
        assert_eq!(subs, vec![share("r.msg.a.*"), share("r.rel.a.*")]);
        assert!(nats_subscriptions("r", "$SYS/#").is_empty());
    }
}
