//! Topic rewrite rules (EMQX's `rewrite`): a PUBLISH topic, or a SUBSCRIBE/UNSUBSCRIBE filter,
//! that a rule's source filter matches is rewritten by the rule's regular expression into its
//! destination, `$1`..`$9` standing for the expression's groups and `${clientid}` for the
//! client's identifier. As EMQX: the rules are read last first, and the first whose source
//! filter matches decides; if its expression does not match, the topic stays as it is (no
//! other rule is tried). Pure: the broker decides where it runs (before the access checks)
//! and what an invalid result means.

use regex::Regex;

use crate::filter::TopicFilter;
use crate::filter_match::FilterMatcher;
use crate::topic::{TopicLimits, TopicName, split_level};

/// Which packets a rule rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewriteAction {
    /// PUBLISH topics.
    Publish,
    /// SUBSCRIBE and UNSUBSCRIBE filters.
    Subscribe,
    /// Both.
    All,
}

/// One rule.
#[derive(Debug, Clone)]
pub struct RewriteRule {
    action: RewriteAction,
    source: FilterMatcher,
    pattern: Regex,
    dest: String,
}

/// Two rules are the same when they were written the same.
impl PartialEq for RewriteRule {
    fn eq(&self, other: &Self) -> bool {
        (self.action, &self.source, self.pattern.as_str(), &self.dest)
            == (
                other.action,
                &other.source,
                other.pattern.as_str(),
                &other.dest,
            )
    }
}

impl Eq for RewriteRule {}

/// Why a rule cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RewriteError {
    #[error("source_topic {0:?} is not a valid topic filter: {1}")]
    Source(String, String),
    #[error("re {0:?} is not a valid regular expression: {1}")]
    Pattern(String, String),
    #[error("dest_topic {dest:?} names ${group}, but re has {groups} group(s)")]
    Group {
        dest: String,
        group: usize,
        groups: usize,
    },
    #[error("dest_topic is empty")]
    EmptyDest,
}

impl RewriteRule {
    /// A rule; every `$N` of `dest` must name a group of `pattern`.
    pub fn new(
        action: RewriteAction,
        source: &str,
        pattern: &str,
        dest: &str,
    ) -> Result<Self, RewriteError> {
        let source = TopicFilter::new(source, &TopicLimits::default())
            .map_err(|e| RewriteError::Source(source.to_owned(), e.to_string()))?;
        let pattern = Regex::new(pattern)
            .map_err(|e| RewriteError::Pattern(pattern.to_owned(), e.to_string()))?;
        if dest.is_empty() {
            return Err(RewriteError::EmptyDest);
        }
        let groups = pattern.captures_len() - 1;
        if let Some(group) = group_refs(dest).find(|&group| group > groups) {
            let dest = dest.to_owned();
            return Err(RewriteError::Group {
                dest,
                group,
                groups,
            });
        }
        Ok(Self {
            action,
            source: FilterMatcher::new(source),
            pattern,
            dest: dest.to_owned(),
        })
    }

    fn applies_to(&self, publish: bool) -> bool {
        match self.action {
            RewriteAction::All => true,
            RewriteAction::Publish => publish,
            RewriteAction::Subscribe => !publish,
        }
    }

    /// `text` rewritten, or `None` when the expression does not match it.
    fn rewrite(&self, text: &str, client_id: &str) -> Option<String> {
        let captures = self.pattern.captures(text)?;
        let mut out = String::with_capacity(self.dest.len() + text.len());
        let mut rest = self.dest.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            if let Some(after) = rest.strip_prefix("${clientid}") {
                out.push_str(client_id);
                rest = after;
            } else if let Some(digit) = rest[1..].chars().next().and_then(|c| c.to_digit(10)) {
                let group = captures.get(digit as usize).map_or("", |m| m.as_str());
                out.push_str(group);
                rest = &rest[2..];
            } else {
                out.push('$');
                rest = &rest[1..];
            }
        }
        out.push_str(rest);
        Some(out)
    }
}

/// The `$N` group numbers `dest` names.
fn group_refs(dest: &str) -> impl Iterator<Item = usize> + '_ {
    dest.match_indices('$').filter_map(|(at, _)| {
        (dest[at + 1..].chars().next()).and_then(|c| c.to_digit(10).map(|d| d as usize))
    })
}

/// The rules, in the order configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicRewrite {
    rules: Vec<RewriteRule>,
}

impl TopicRewrite {
    pub fn new(rules: Vec<RewriteRule>) -> Self {
        Self { rules }
    }

    /// Whether there are no rules (nothing is ever rewritten).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The topic a PUBLISH to `topic` by the client whose identifier `client_id` gives is
    /// rewritten to, if a rule rewrites it (`client_id` is asked only then).
    pub fn publish<'c>(
        &self,
        topic: &TopicName,
        client_id: impl FnOnce() -> &'c str,
    ) -> Option<String> {
        let rule = (self.rules.iter().rev())
            .filter(|rule| rule.applies_to(true))
            .find(|rule| rule.source.matches_bytes(topic.as_bytes()))?;
        rule.rewrite(topic.as_str(), client_id())
    }

    /// The filter a SUBSCRIBE or UNSUBSCRIBE of `filter` (a shared subscription's filter
    /// without `$share/<group>/`) is rewritten to, if a rule rewrites it.
    pub fn subscribe(&self, filter: &str, client_id: &str) -> Option<String> {
        let rule = (self.rules.iter().rev())
            .filter(|rule| rule.applies_to(false))
            .find(|rule| covers(rule.source.filter().as_bytes(), filter.as_bytes()))?;
        rule.rewrite(filter, client_id)
    }
}

/// Whether `source` covers the filter `text`: level by level, a `+` of `source` takes any one
/// level of `text` and a `#` the rest; the wildcards of `text` are taken literally.
fn covers(source: &[u8], text: &[u8]) -> bool {
    let (mut source, mut text) = (Some(source), Some(text));
    loop {
        match (source, text) {
            (None, None) => return true,
            (Some(s), _) if s == b"#" => return true,
            (Some(s), Some(t)) => {
                let (s_level, s_rest) = split_level(s);
                let (t_level, t_rest) = split_level(t);
                if s_level != b"+" && s_level != t_level {
                    return false;
                }
                (source, text) = (s_rest, t_rest);
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(RewriteAction, &str, &str, &str)]) -> TopicRewrite {
        let made = list
            .iter()
            .map(|(a, s, p, d)| RewriteRule::new(*a, s, p, d).unwrap());
        TopicRewrite::new(made.collect())
    }

    fn topic(text: &str) -> TopicName {
        TopicName::new(text, &TopicLimits::default()).unwrap()
    }

    #[test]
    fn groups_and_the_client_id_fill_the_destination() {
        let r = rules(&[(RewriteAction::All, "x/#", "^x/y/(.+)$", "z/${clientid}/$1")]);
        assert_eq!(
            r.publish(&topic("x/y/1/2"), || "dev"),
            Some("z/dev/1/2".into())
        );
        assert_eq!(
            r.publish(&topic("x/q"), || "dev"),
            None,
            "the expression does not match"
        );
        assert_eq!(
            r.publish(&topic("w/y/1"), || "dev"),
            None,
            "the filter does not match"
        );
        assert_eq!(r.subscribe("x/y/+", "dev"), Some("z/dev/+".into()));
    }

    #[test]
    fn the_last_matching_rule_decides_as_in_emqx() {
        let r = rules(&[
            (RewriteAction::Publish, "a/#", "^a/(.*)$", "first/$1"),
            (RewriteAction::Publish, "a/b/#", "^nothing$", "second"),
        ]);
        // The later rule's filter matches and its expression does not: no rewrite.
        assert_eq!(r.publish(&topic("a/b/c"), || "c"), None);
        assert_eq!(r.publish(&topic("a/x"), || "c"), Some("first/x".into()));
        assert_eq!(
            r.subscribe("a/x", "c"),
            None,
            "a publish rule leaves filters alone"
        );
    }

    #[test]
    fn a_destination_naming_a_missing_group_is_refused() {
        let made = RewriteRule::new(RewriteAction::All, "a/#", "^a/(.*)$", "b/$2");
        assert!(matches!(made, Err(RewriteError::Group { group: 2, .. })));
        assert!(RewriteRule::new(RewriteAction::All, "a/#/b", "x", "y").is_err());
        assert!(RewriteRule::new(RewriteAction::All, "a/#", "(", "y").is_err());
    }

    #[test]
    fn a_filter_source_covers_filters_level_by_level() {
        assert!(covers(b"a/+/c", b"a/+/c"));
        assert!(covers(b"a/#", b"a/b/#"));
        assert!(!covers(b"a/b", b"a/+"));
    }
}
