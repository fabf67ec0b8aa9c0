//! mosquitto's ACL file: which topics a client may read and write, with mosquitto 2.0's
//! semantics (its documentation and `security_default.c`, checked against its broker).
//!
//! Lines (see `man mosquitto.conf`, `acl_file`):
//!
//! - `topic [read|write|readwrite|deny] <filter>`: before any `user` line, a rule for anonymous
//!   clients (no username); after `user <name>`, a rule for that user;
//! - `user <username>`: starts a user's section (a repeated section adds to the first);
//! - `pattern [read|write|readwrite|deny] <filter>`: a rule for every client, wherever it stands,
//!   with `%c` replaced by the client id and `%u` by the username (a pattern with `%u` applies to
//!   no anonymous client);
//! - blank lines and `#` comments.
//!
//! The filter may use `+` and `#`; a filter starting with a wildcard matches no `$` topic.
//!
//! A check looks at the client's own section first (the user's section, or the anonymous one),
//! deny rules before grants: a matching deny refuses, a matching grant allows. Then the
//! patterns, the same way. Nothing matched: refused. A client whose client id or username
//! contains `+` or `#` gets nothing from patterns (it could name itself into a wildcard).

use std::collections::HashMap;
use std::path::Path;

use super::acl_line::AclLine;
pub(crate) use super::acl_line::RuleAccess;
use super::filter::{self, RuleFilter, Substitution};
use super::{Access, AccessFileError, ClientIdentity, LineProblem, load_file, parse_lines};

/// The rules of an ACL file.
#[derive(Debug, Clone, Default)]
pub struct AclFile {
    /// `topic` lines before any `user` line: the anonymous clients' section.
    general: RuleSet,
    /// `topic` lines after `user <name>`, by name.
    users: HashMap<Box<str>, RuleSet>,
    /// `pattern` lines.
    patterns: RuleSet,
}

/// What a client may read of a SUBSCRIBE filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscribeScope {
    /// Every topic the filter can match is readable: deliver without checking each message.
    All,
    /// Some topics may be readable: check each delivered message with [`AclFile::check`].
    Some,
    /// No topic the filter can match is readable: refuse the subscription (SUBACK 0x87).
    None,
}

#[derive(Debug, Clone, Default)]
struct RuleSet {
    denies: Vec<RuleFilter>,
    grants: Vec<Grant>,
    /// Grants by their literal first level (indexes into `grants`): a check looks only at the
    /// grants filed under the topic's first level and at `unindexed`.
    by_first_level: HashMap<Box<str>, Vec<usize>>,
    /// Grants whose first level is a wildcard or a substitution.
    unindexed: Vec<usize>,
}

#[derive(Debug, Clone)]
struct Grant {
    filter: RuleFilter,
    read: bool,
    write: bool,
}

impl Grant {
    fn allows(&self, access: Access) -> bool {
        match access {
            Access::Read => self.read,
            Access::Write => self.write,
        }
    }
}

/// How one rule set's read rules meet a subscription filter.
#[derive(Debug, Clone, Copy, Default)]
struct ReadView {
    deny_covers: bool,
    deny_overlaps: bool,
    grant_covers: bool,
    grant_overlaps: bool,
}

impl RuleSet {
    /// The grants that may match `topic`: those filed under its first level, and those whose
    /// first level is a wildcard or a substitution.
    fn grants_for_topic<'a>(&'a self, topic: &str) -> impl Iterator<Item = &'a Grant> {
        let first = topic.split('/').next().unwrap_or_default();
        let filed = self.by_first_level.get(first).into_iter().flatten();
        filed
            .chain(self.unindexed.iter())
            .map(|&index| &self.grants[index])
    }

    /// How this set's deny rules and read grants meet `subscription` for `client`.
    fn read_view(
        &self,
        client: &ClientIdentity<'_>,
        subscription: &[filter::Level<'_>],
    ) -> ReadView {
        let mut view = ReadView::default();
        for deny in &self.denies {
            if let Some(levels) = deny.levels_for(client) {
                view.deny_covers |= filter::covers(&levels, subscription);
                view.deny_overlaps |= filter::overlaps(&levels, subscription);
            }
        }
        for grant in self.grants.iter().filter(|g| g.allows(Access::Read)) {
            if let Some(levels) = grant.filter.levels_for(client) {
                view.grant_covers |= filter::covers(&levels, subscription);
                view.grant_overlaps |= filter::overlaps(&levels, subscription);
            }
        }
        view
    }

    fn add(&mut self, access: RuleAccess, filter: RuleFilter) {
        let (read, write) = match access {
            RuleAccess::Deny => return self.denies.push(filter),
            RuleAccess::Read => (true, false),
            RuleAccess::Write => (false, true),
            RuleAccess::ReadWrite => (true, true),
        };
        let index = self.grants.len();
        match filter.literal_first_level() {
            Some(first) => self
                .by_first_level
                .entry(first.into())
                .or_default()
                .push(index),
            None => self.unindexed.push(index),
        }
        self.grants.push(Grant {
            filter,
            read,
            write,
        });
    }
}

impl AclFile {
    /// Parses the text of an ACL file.
    pub fn parse(text: &str) -> Result<Self, AccessFileError> {
        let mut acl = Self::default();
        let mut section: Option<Box<str>> = None;
        parse_lines(text, |line| acl.add_line(&mut section, line))?;
        Ok(acl)
    }

    /// The rules a backend handed over for one client (`access` and a literal filter each),
    /// as the anonymous section of an ACL: check them with an identity without a username.
    pub(crate) fn from_rules<'a>(
        rules: impl IntoIterator<Item = (RuleAccess, &'a str)>,
    ) -> Result<Self, LineProblem> {
        let mut acl = Self::default();
        for (access, text) in rules {
            let filter = RuleFilter::parse(text, Substitution::Literal)?;
            acl.general.add(access, filter);
        }
        Ok(acl)
    }

    /// Reads and parses the ACL file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AccessFileError> {
        load_file(path.as_ref(), Self::parse)
    }

    /// Whether `client` may `access` `topic` (a topic name, without wildcards). Allocation-free.
    pub fn check(&self, client: &ClientIdentity<'_>, topic: &str, access: Access) -> bool {
        for rules in self.rule_sets(client).into_iter().flatten() {
            if rules.denies.iter().any(|deny| deny.matches(client, topic)) {
                return false;
            }
            if rules
                .grants_for_topic(topic)
                .filter(|grant| grant.allows(access))
                .any(|grant| grant.filter.matches(client, topic))
            {
                return true;
            }
        }
        false
    }

    /// How much of the SUBSCRIBE `filter` (valid, `$share/<group>/` removed) `client` may read.
    ///
    /// Conservative: [`SubscribeScope::All`] and [`SubscribeScope::None`] only where they
    /// follow from the rules for every topic the filter matches; otherwise
    /// [`SubscribeScope::Some`].
    pub fn subscribe_scope(&self, client: &ClientIdentity<'_>, filter: &str) -> SubscribeScope {
        let subscription = filter::subscription_levels(filter);
        let [section, patterns] = self.rule_sets(client);
        let own = section.map(|rules| rules.read_view(client, &subscription));
        let own = own.unwrap_or_default();
        if own.deny_covers {
            return SubscribeScope::None;
        }
        if own.grant_covers && !own.deny_overlaps {
            return SubscribeScope::All;
        }
        let shared = patterns.map(|rules| rules.read_view(client, &subscription));
        let shared = shared.unwrap_or_default();
        if !own.grant_overlaps && (!shared.grant_overlaps || shared.deny_covers) {
            return SubscribeScope::None;
        }
        if !own.deny_overlaps && shared.grant_covers && !shared.deny_overlaps {
            return SubscribeScope::All;
        }
        SubscribeScope::Some
    }

    /// The rule sets a check walks, in order: the client's own section (its user's, or the
    /// anonymous one), then the patterns (none for a client that could name itself into a
    /// wildcard).
    fn rule_sets(&self, client: &ClientIdentity<'_>) -> [Option<&RuleSet>; 2] {
        let section = match client.username {
            Some(name) => self.users.get(name),
            None => Some(&self.general),
        };
        let patterns = substitution_is_safe(client).then_some(&self.patterns);
        [section, patterns]
    }

    fn add_line(&mut self, section: &mut Option<Box<str>>, line: &str) -> Result<(), LineProblem> {
        match AclLine::parse(line)? {
            AclLine::Nothing => {}
            AclLine::User(name) => *section = Some(name.into()),
            AclLine::Topic(access, text) => {
                let filter = RuleFilter::parse(text, Substitution::Literal)?;
                let rules = match section {
                    Some(name) => self.users.entry(name.clone()).or_default(),
                    None => &mut self.general,
                };
                rules.add(access, filter);
            }
            AclLine::Pattern(access, text) => {
                let filter = RuleFilter::parse(text, Substitution::ClientIdAndUsername)?;
                self.patterns.add(access, filter);
            }
        }
        Ok(())
    }
}

/// Whether `client`'s id and username are free of `+` and `#` (mosquitto grants no pattern
/// access otherwise, so that a client cannot name itself into a wildcard).
fn substitution_is_safe(client: &ClientIdentity<'_>) -> bool {
    let unsafe_text = |text: &str| text.contains(['+', '#']);
    !unsafe_text(client.client_id) && !client.username.is_some_and(unsafe_text)
}
