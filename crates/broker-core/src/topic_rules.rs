//! The operator's rules over topics, read at start: topic rewrite (`[[rewrite]]`, the router's
//! [`TopicRewrite`]), exclusive subscriptions ([`crate::exclusive`]) and delayed publish
//! ([`crate::delayed`], `[delayed]`). A rewrite runs first,
//! before the access checks, so that the ACL judges the topic a message is really published
//! to and the filter a session really gets (a rule cannot carry a client past them).

use codec::MqttStr;
use router::{SHARE_PREFIX, TopicLimits, TopicName, TopicRewrite};

use crate::delayed::DelayedPublish;
use crate::exclusive::ExclusiveSubscriptions;

/// The rules over topics.
#[derive(Debug, Default)]
pub struct TopicRules {
    pub rewrite: TopicRewrite,
    pub exclusive: ExclusiveSubscriptions,
    /// Delayed publish's settings, bound and ids.
    pub delayed: DelayedPublish,
}

impl TopicRules {
    /// Where a rule rewrites a PUBLISH of `client_id` to `topic`, if one does and the result
    /// is a valid topic name (a rule that writes something else is taken as not matching, and
    /// logged at debug). Without rules: `None` at once, nothing looked at.
    pub fn rewritten_topic(
        &self,
        topic: &TopicName,
        client_id: &MqttStr,
        limits: &TopicLimits,
    ) -> Option<TopicName> {
        if self.rewrite.is_empty() {
            return None;
        }
        // The client id is read as text (a UTF-8 check) only for a rule that matches.
        let text = self.rewrite.publish(topic, || client_id.as_str())?;
        match TopicName::new(&text, limits) {
            Ok(rewritten) => Some(rewritten),
            Err(error) => {
                tracing::debug!(
                    from = topic.as_str(),
                    to = text,
                    %error,
                    "topic rewrite gave no valid topic: not applied"
                );
                None
            }
        }
    }

    /// The filter a SUBSCRIBE or UNSUBSCRIBE of `text` by `client_id` names: `text`, or
    /// where a rule rewrites it (a shared subscription's filter without its
    /// `$share/<group>/`, which is kept).
    pub fn filter_text(&self, text: &MqttStr, client_id: &str) -> MqttStr {
        if self.rewrite.is_empty() {
            return text.clone();
        }
        let (prefix, filter) = split_share(text.as_str());
        let Some(rewritten) = self.rewrite.subscribe(filter, client_id) else {
            return text.clone();
        };
        MqttStr::try_from(format!("{prefix}{rewritten}")).unwrap_or_else(|_| text.clone())
    }
}

/// A shared subscription's `$share/<group>/` and the rest; `("", text)` for any other.
fn split_share(text: &str) -> (&str, &str) {
    let Some(rest) = text.strip_prefix(SHARE_PREFIX) else {
        return ("", text);
    };
    match rest.find('/') {
        Some(slash) => text.split_at(SHARE_PREFIX.len() + slash + 1),
        None => ("", text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use router::{RewriteAction, RewriteRule};

    fn text(s: &str) -> MqttStr {
        MqttStr::try_from(s.to_owned()).unwrap()
    }

    #[test]
    fn a_shared_subscription_keeps_its_group_and_has_its_filter_rewritten() {
        let rule = RewriteRule::new(RewriteAction::All, "old/#", "^old/(.*)$", "new/$1").unwrap();
        let rules = TopicRules {
            rewrite: TopicRewrite::new(vec![rule]),
            ..TopicRules::default()
        };
        assert_eq!(
            rules.filter_text(&text("$share/g/old/+"), "c"),
            text("$share/g/new/+")
        );
        assert_eq!(rules.filter_text(&text("old/a"), "c"), text("new/a"));
        assert_eq!(rules.filter_text(&text("other"), "c"), text("other"));
        let limits = TopicLimits::default();
        let topic = TopicName::new("old/x", &limits).unwrap();
        let rewritten = rules.rewritten_topic(&topic, &text("c"), &limits).unwrap();
        assert_eq!(rewritten.as_str(), "new/x");
        let other = TopicName::new("other", &limits).unwrap();
        assert!(rules.rewritten_topic(&other, &text("c"), &limits).is_none());
    }
}
