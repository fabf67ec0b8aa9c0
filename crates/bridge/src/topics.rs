//! Topic mapping between the two brokers (mosquitto's semantics): a rule's local filter is
//! `local_prefix + pattern`, its remote filter `remote_prefix + pattern`; a message crossing
//! the bridge has the source side's prefix replaced by the destination side's.

use crate::settings::TopicRule;

impl TopicRule {
    /// What the bridge subscribes to on the local broker.
    pub fn local_filter(&self) -> String {
        format!("{}{}", self.local_prefix, self.pattern)
    }

    /// What the bridge subscribes to on the remote broker.
    pub fn remote_filter(&self) -> String {
        format!("{}{}", self.remote_prefix, self.pattern)
    }

    /// The remote topic of local `topic`, when this rule sends it out.
    pub fn to_remote(&self, topic: &str) -> Option<String> {
        if !self.direction.outgoing() {
            return None;
        }
        swap_prefix(
            topic,
            &self.local_prefix,
            &self.remote_prefix,
            &self.pattern,
        )
    }

    /// The local topic of remote `topic`, when this rule brings it in.
    pub fn to_local(&self, topic: &str) -> Option<String> {
        if !self.direction.incoming() {
            return None;
        }
        swap_prefix(
            topic,
            &self.remote_prefix,
            &self.local_prefix,
            &self.pattern,
        )
    }
}

/// The destination topic of `topic` under the first rule that maps it (`map` is
/// [`TopicRule::to_remote`] or [`TopicRule::to_local`]).
pub(crate) fn map_first(
    rules: &[TopicRule],
    topic: &str,
    map: impl Fn(&TopicRule, &str) -> Option<String>,
) -> Option<String> {
    rules.iter().find_map(|rule| map(rule, topic))
}

/// `to + rest` when `topic` is `from + rest` and `rest` matches `pattern`.
fn swap_prefix(topic: &str, from: &str, to: &str, pattern: &str) -> Option<String> {
    let rest = topic.strip_prefix(from)?;
    if rest.is_empty() || !filter_matches(pattern, rest) {
        return None;
    }
    Some(format!("{to}{rest}"))
}

/// MQTT topic matching: `+` one level, `#` the rest (the parent level included); a wildcard
/// at the start does not match a topic beginning with `$`.
pub(crate) fn filter_matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && filter.starts_with(['+', '#']) {
        return false;
    }
    let mut topic_levels = topic.split('/');
    for level in filter.split('/') {
        if level == "#" {
            return true;
        }
        match topic_levels.next() {
            Some(t) if level == "+" || level == t => {}
            _ => return false,
        }
    }
    topic_levels.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Direction;
    use codec::QoS;

    fn rule(pattern: &str, direction: Direction, local: &str, remote: &str) -> TopicRule {
        TopicRule {
            pattern: pattern.into(),
            direction,
            qos: QoS::AtLeastOnce,
            local_prefix: local.into(),
            remote_prefix: remote.into(),
        }
    }

    #[test]
    fn filters_match_like_mqtt() {
        assert!(filter_matches("a/#", "a"));
        assert!(filter_matches("a/#", "a/b/c"));
        assert!(filter_matches("a/+/c", "a/b/c"));
        assert!(!filter_matches("a/+/c", "a/b/d"));
        assert!(!filter_matches("a/+", "a/b/c"));
        assert!(filter_matches("+/+", "/x"));
        assert!(filter_matches("#", "anything/at/all"));
        assert!(!filter_matches("#", "$SYS/broker"));
        assert!(filter_matches("$SYS/#", "$SYS/broker"));
        assert!(!filter_matches("a/b", "a/b/c"));
    }

    #[test]
    fn out_rules_swap_the_local_prefix_for_the_remote_one() {
        let r = rule("sensors/#", Direction::Out, "site/", "edge1/");
        assert_eq!(r.local_filter(), "site/sensors/#");
        assert_eq!(r.remote_filter(), "edge1/sensors/#");
        assert_eq!(
            r.to_remote("site/sensors/t1").as_deref(),
            Some("edge1/sensors/t1")
        );
        assert_eq!(r.to_remote("sensors/t1"), None, "without the local prefix");
        assert_eq!(r.to_remote("site/other/t1"), None);
        assert_eq!(
            r.to_local("edge1/sensors/t1"),
            None,
            "an out rule brings nothing in"
        );
    }

    #[test]
    fn in_rules_swap_the_remote_prefix_for_the_local_one() {
        let r = rule("cmd/+", Direction::In, "", "fleet/");
        assert_eq!(
            r.to_local("fleet/cmd/reboot").as_deref(),
            Some("cmd/reboot")
        );
        assert_eq!(r.to_local("fleet/cmd/a/b"), None);
        assert_eq!(r.to_remote("cmd/reboot"), None);
    }

    #[test]
    fn both_rules_map_each_way_and_the_first_matching_rule_wins() {
        let rules = [
            rule("both/#", Direction::Both, "l/", "r/"),
            rule("#", Direction::Out, "", "all/"),
        ];
        let out = |t: &str| map_first(&rules, t, TopicRule::to_remote);
        let inward = |t: &str| map_first(&rules, t, TopicRule::to_local);
        assert_eq!(out("l/both/x").as_deref(), Some("r/both/x"));
        assert_eq!(out("other").as_deref(), Some("all/other"));
        assert_eq!(inward("r/both/x").as_deref(), Some("l/both/x"));
        assert_eq!(inward("all/other"), None);
    }

    #[test]
    fn empty_prefixes_keep_the_topic() {
        let r = rule("a/#", Direction::Both, "", "");
        assert_eq!(r.to_remote("a/b").as_deref(), Some("a/b"));
        assert_eq!(r.to_local("a/b").as_deref(), Some("a/b"));
    }
}
