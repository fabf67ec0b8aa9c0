//! [`ClientGrant`]: what the backend that let a client in says about its topics, kept with
//! the connection.

use std::time::SystemTime;

use crate::acl::RuleAccess as FileAccess;
use crate::backend::{Grant, RuleAccess};
use crate::{AclFile, LineProblem};

/// A connected client's login, as far as topic checks and expiry go.
#[derive(Debug, Clone, Default)]
pub struct ClientGrant {
    /// The chain link that let the client in, when it was an external backend.
    pub link: Option<usize>,
    /// The client's own rules, when the backend handed them over (Redis sets, JWT claims).
    pub rules: Option<AclFile>,
    /// Every topic check is allowed.
    pub superuser: bool,
    /// When the credentials expire (the client is disconnected then).
    pub expires_at: Option<SystemTime>,
    /// The backend that let the client in is asked about each topic it has not cached.
    pub remote_topics: bool,
}

impl ClientGrant {
    /// The grant of a client that link `link` (which `checks_topics` or not) let in.
    pub fn from_backend(
        grant: Grant,
        link: usize,
        checks_topics: bool,
    ) -> Result<Self, LineProblem> {
        let rules = grant
            .rules
            .as_ref()
            .map(|rules| {
                AclFile::from_rules(
                    rules
                        .iter()
                        .map(|rule| (file_access(rule.access), rule.filter.as_str())),
                )
            })
            .transpose()?;
        Ok(Self {
            link: Some(link),
            remote_topics: checks_topics && rules.is_none() && !grant.superuser,
            rules,
            superuser: grant.superuser,
            expires_at: grant.expires_at,
        })
    }

    /// Whether an external backend gave this grant and a reload may change it (its rules,
    /// its answers per topic, or the superuser flag): such a client is asked about again.
    pub fn may_change_on_reload(&self) -> bool {
        self.link.is_some() && (self.superuser || self.restricts())
    }

    /// Whether anything about this grant restricts topics beyond the ACL file.
    pub fn restricts(&self) -> bool {
        !self.superuser && (self.rules.is_some() || self.remote_topics)
    }
}

fn file_access(access: RuleAccess) -> FileAccess {
    match access {
        RuleAccess::Read => FileAccess::Read,
        RuleAccess::Write => FileAccess::Write,
        RuleAccess::ReadWrite => FileAccess::ReadWrite,
    }
}
