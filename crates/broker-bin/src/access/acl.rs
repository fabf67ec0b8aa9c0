//! mosquitto's ACL file: which topics a client may read and write.
//!
//! Lines (see `man mosquitto.conf`, `acl_file`):
//!
//! - `topic [read|write|readwrite|deny] <filter>`: before any `user` line, a rule for every
//!   client (anonymous ones included); after `user <name>`, a rule for that user only;
//! - `user <username>`: starts a user's section (a repeated section adds to the first);
//! - `pattern [read|write|readwrite|deny] <filter>`: a rule for every client, wherever it stands,
//!   with `%c` replaced by the client id and `%u` by the username (a pattern with `%u` applies to
//!   no anonymous client);
//! - blank lines and `#` comments.
//!
//! The filter may use `+` and `#`; a filter starting with a wildcard matches no `$` topic. A
//! `deny` rule that matches a topic refuses it whatever grants it; otherwise a matching rule of
//! the client's user section, of the general section or a pattern that grants the access allows
//! it; otherwise it is refused. As in mosquitto, patterns grant nothing to a client whose client
//! id or username contains `+` or `#`.
//!
//! Where real mosquitto 2.0 differs: it applies the general section to anonymous clients only,
//! and a grant of the client's own section wins over a `deny` pattern (it checks the section,
//! deny rules first, and then the patterns).

use std::collections::HashMap;
use std::path::Path;

use super::acl_line::{AclLine, RuleAccess};
use super::filter::{self, RuleFilter, Substitution};
use super::{Access, AccessFileError, ClientIdentity, LineProblem, load_file, parse_lines};

/// The rules of an ACL file.
#[derive(Debug, Clone, Default)]
pub struct AclFile {
    /// `topic` lines before any `user` line.
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

impl RuleSet {
    fn add(&mut self, access: RuleAccess, filter: RuleFilter) {
        let (read, write) = match access {
            RuleAccess::Deny => return self.denies.push(filter),
            RuleAccess::Read => (true, false),
            RuleAccess::Write => (false, true),
            RuleAccess::ReadWrite => (true, true),
        };
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

    /// Reads and parses the ACL file at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, AccessFileError> {
        load_file(path.as_ref(), Self::parse)
    }

    /// Whether `client` may `access` `topic` (a topic name, without wildcards). Allocation-free.
    pub fn check(&self, client: &ClientIdentity<'_>, topic: &str, access: Access) -> bool {
        let denied = self
            .denies_for(client)
            .any(|filter| filter.matches(client, topic));
        !denied
            && self
                .grants_for(client)
                .any(|grant| grant.allows(access) && grant.filter.matches(client, topic))
    }

    /// How much of the SUBSCRIBE `filter` (valid, `$share/<group>/` removed) `client` may read.
    ///
    /// Conservative: [`SubscribeScope::All`] only when one read grant covers the filter and no
    /// deny rule overlaps it; [`SubscribeScope::None`] only when a deny rule covers the filter or
    /// no read grant overlaps it; otherwise [`SubscribeScope::Some`].
    pub fn subscribe_scope(&self, client: &ClientIdentity<'_>, filter: &str) -> SubscribeScope {
        let subscription = filter::subscription_levels(filter);
        let mut denied_in_part = false;
        for deny in self.denies_for(client) {
            let Some(levels) = deny.levels_for(client) else {
                continue;
            };
            if filter::covers(&levels, &subscription) {
                return SubscribeScope::None;
            }
            denied_in_part |= filter::overlaps(&levels, &subscription);
        }
        let mut readable_in_part = false;
        let mut readable_in_full = false;
        let read_grants = self
            .grants_for(client)
            .filter(|grant| grant.allows(Access::Read));
        for grant in read_grants {
            let Some(levels) = grant.filter.levels_for(client) else {
                continue;
            };
            readable_in_full |= filter::covers(&levels, &subscription);
            readable_in_part |= filter::overlaps(&levels, &subscription);
        }
        match (readable_in_part, readable_in_full && !denied_in_part) {
            (false, _) => SubscribeScope::None,
            (true, true) => SubscribeScope::All,
            (true, false) => SubscribeScope::Some,
        }
    }

    /// The rule sets that apply to `client`: the general section, its user section, patterns.
    fn rule_sets(&self, client: &ClientIdentity<'_>) -> [Option<&RuleSet>; 3] {
        let user = client.username.and_then(|name| self.users.get(name));
        [Some(&self.general), user, Some(&self.patterns)]
    }

    fn denies_for(&self, client: &ClientIdentity<'_>) -> impl Iterator<Item = &RuleFilter> {
        self.rule_sets(client)
            .into_iter()
            .flatten()
            .flat_map(|rules| rules.denies.iter())
    }

    /// The grants for `client`; patterns only when its id and username are safe to substitute.
    fn grants_for(&self, client: &ClientIdentity<'_>) -> impl Iterator<Item = &Grant> {
        let [general, user, patterns] = self.rule_sets(client);
        let patterns = patterns.filter(|_| substitution_is_safe(client));
        [general, user, patterns]
            .into_iter()
            .flatten()
            .flat_map(|rules| rules.grants.iter())
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
