//! The chain of `auth.backends`, walked in order on a worker thread: the first backend that
//! accepts a login lets the client in (mosquitto-go-auth's rule); none accepting refuses it,
//! and a chain where some backend failed to answer says the service is unavailable.

use std::sync::Arc;

use crate::PasswordFile;
use crate::backend::{
    AclAnswer, AclRequest, Backend, BackendError, ExchangeAnswer, ExchangeRound, Grant,
    LoginAnswer, LoginRequest,
};
use crate::scram::{Mechanism, ScramCredential};

/// One entry of `auth.backends`.
#[derive(Clone)]
pub enum Link {
    /// The password file (`auth.password_file`), answered without blocking.
    File,
    /// An external backend, answered on a worker thread.
    External(Arc<dyn Backend>),
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Link {
    pub fn name(&self) -> &'static str {
        match self {
            Self::File => "file",
            Self::External(backend) => backend.name(),
        }
    }
}

/// How a walk of the chain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginVerdict {
    /// Link `link` accepted the client with `grant`.
    Allowed { grant: Grant, link: usize },
    /// No backend accepted the client, and every one answered.
    Refused,
    /// No backend accepted the client, and at least one could not answer (the last error).
    Unavailable(String),
}

/// The configured backends, in order.
#[derive(Debug, Clone, Default)]
pub struct Chain {
    links: Vec<Link>,
}

impl Chain {
    pub fn new(links: Vec<Link>) -> Self {
        Self { links }
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// Whether any backend is external (logins may then wait for a worker).
    pub fn has_external(&self) -> bool {
        self.links.iter().any(|l| matches!(l, Link::External(_)))
    }

    /// Judges a login from link `start` on; `passwords` answers the `file` links.
    pub fn login_from(
        &self,
        start: usize,
        request: &LoginRequest,
        passwords: Option<&PasswordFile>,
    ) -> LoginVerdict {
        let mut failure = None;
        for (index, link) in self.links.iter().enumerate().skip(start) {
            let answer = match link {
                Link::File => Ok(file_login(passwords, request)),
                Link::External(backend) => backend.login(request),
            };
            match answer {
                Ok(LoginAnswer::Allow(grant)) => {
                    return LoginVerdict::Allowed { grant, link: index };
                }
                Ok(LoginAnswer::Deny | LoginAnswer::Unknown) => {}
                Err(error) => {
                    tracing::warn!(%error, "authentication backend failed");
                    failure = Some(error.to_string());
                }
            }
        }
        failure.map_or(LoginVerdict::Refused, LoginVerdict::Unavailable)
    }

    /// The first external link that drives the AUTH exchange of `method`.
    pub fn driver_of(&self, method: &str) -> Option<usize> {
        self.links.iter().position(|link| match link {
            Link::External(backend) => backend.drives_method(method),
            Link::File => false,
        })
    }

    /// Asks link `link` for one round of an AUTH exchange.
    pub fn exchange_round(
        &self,
        link: usize,
        round: &ExchangeRound,
    ) -> Result<ExchangeAnswer, BackendError> {
        match self.links.get(link) {
            Some(Link::External(backend)) => backend.exchange_round(round),
            _ => Ok(ExchangeAnswer::Deny),
        }
    }

    /// The SCRAM credential of `username` from the first external backend that has one, and
    /// that backend's link.
    pub fn scram_credential(
        &self,
        username: &str,
        mechanism: Mechanism,
    ) -> Result<Option<(usize, ScramCredential)>, BackendError> {
        for (index, link) in self.links.iter().enumerate() {
            if let Link::External(backend) = link
                && let Some(credential) = backend.scram_credential(username, mechanism)?
            {
                return Ok(Some((index, credential)));
            }
        }
        Ok(None)
    }

    /// The grant link `link` hands `username` (as `client_id`) without credentials, if it
    /// hands any (Redis: its ACL sets and superuser flag).
    pub fn grant_of(
        &self,
        link: usize,
        client_id: &str,
        username: &str,
    ) -> Result<Option<Grant>, BackendError> {
        match self.links.get(link) {
            Some(Link::External(backend)) => backend.current_grant(client_id, Some(username)),
            _ => Ok(None),
        }
    }

    /// Asks link `link` (the backend that let the client in) whether `request` is allowed.
    pub fn check_topic(&self, link: usize, request: &AclRequest) -> Result<bool, BackendError> {
        match self.links.get(link) {
            Some(Link::External(backend)) => Ok(backend.check_acl(request)? == AclAnswer::Allow),
            _ => Ok(false),
        }
    }

    /// Asks link `link` (the backend that let the client in) about a connected client
    /// (`client`: its client id and username) again, after a reload: the whole grant where the
    /// backend hands it over, else one subscribe check per filter in `requests`.
    pub fn recheck(
        &self,
        link: usize,
        client: (&str, Option<&str>),
        requests: &[AclRequest],
    ) -> Recheck {
        let Some(Link::External(backend)) = self.links.get(link) else {
            return Recheck::Filters(vec![FilterAnswer::Unknown; requests.len()]);
        };
        match recheck_with(backend.as_ref(), client, requests) {
            Ok(recheck) => recheck,
            Err(error) => {
                tracing::warn!(%error, "authentication backend failed to re-check a grant");
                Recheck::Failed(error.to_string())
            }
        }
    }
}

fn recheck_with(
    backend: &dyn Backend,
    (client_id, username): (&str, Option<&str>),
    requests: &[AclRequest],
) -> Result<Recheck, BackendError> {
    if let Some(grant) = backend.current_grant(client_id, username)? {
        return Ok(Recheck::Grant(grant));
    }
    let answers = requests
        .iter()
        .map(|request| {
            Ok(match backend.check_acl(request)? {
                AclAnswer::Allow => FilterAnswer::Allowed,
                AclAnswer::Deny => FilterAnswer::Refused,
                AclAnswer::Unknown => FilterAnswer::Unknown,
            })
        })
        .collect::<Result<Vec<_>, BackendError>>()?;
    Ok(Recheck::Filters(answers))
}

/// What a backend says about a connected client's grant after a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recheck {
    /// The backend handed the client's grant over afresh (Redis).
    Grant(Grant),
    /// The backend's answer per subscription filter asked, in order (HTTP's ACL URL; JWT
    /// claims cannot change and answer `None`).
    Filters(Vec<FilterAnswer>),
    /// The backend could not answer (down, timed out, bad answer): the old grant stands.
    Failed(String),
}

/// A backend's answer about one subscription filter of a connected client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterAnswer {
    Allowed,
    Refused,
    /// No opinion (the backend cannot tell): the subscription stays.
    Unknown,
}

/// The password file's answer: allowed for a known user with the right password, no opinion
/// otherwise (a later backend may know the user).
pub fn file_login(passwords: Option<&PasswordFile>, request: &LoginRequest) -> LoginAnswer {
    let (Some(passwords), Some(username)) = (passwords, request.username.as_deref()) else {
        return LoginAnswer::Unknown;
    };
    let password = request.password.as_deref().unwrap_or_default();
    if passwords.verify(username, password) {
        LoginAnswer::Allow(Grant::default())
    } else {
        LoginAnswer::Unknown
    }
}
