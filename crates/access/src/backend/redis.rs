//! The Redis backend, in mosquitto-go-auth's Redis layout:
//!
//! - `GET <username>`: the password hash (`$7$`, `$6$` or go-auth's `PBKDF2$...`, see
//!   [`SaltEncoding`]); no such key: the backend has no opinion.
//! - `GET <username>:su` = `true`: a superuser.
//! - Sets of topic filters: `<username>:sacls` (subscribe) and `<username>:racls` (receive),
//!   both read rules; `<username>:wacls` (publish), write rules; `<username>:rwacls`, both. The
//!   same under `common:` apply to everyone. `%u` and `%c` in a member stand for the username
//!   and client id.
//!
//! - `HGET <username>:scram <MECHANISM>`: the user's SCRAM credential for MQTT 5 enhanced
//!   authentication (`[auth.scram] store = "redis"`), `iterations:salt:StoredKey:ServerKey` as
//!   in the credential file (`crate::scram::file`) after `username:MECHANISM:`.
//!
//! A login fetches all of it in one round trip and hands the rules over with the acceptance;
//! a topic check fetches and judges the same. Connections are kept in a small pool; the
//! connection, the round trip and the wait for a pooled connection share one timeout.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ::redis::{Client, Connection, Pipeline, RedisError, Value};
use broker_api::redact_url;

use super::password_hash::{self, SaltEncoding};
use super::rules::{allows, rule, substitute};
use super::setup::{SetupError, check_timeout};
use super::slots::{Slots, remaining, timeout_error};
use super::{
    AclAnswer, AclRequest, Backend, BackendError, Grant, LoginAnswer, LoginRequest, RuleAccess,
    TopicRule,
};
use crate::ClientIdentity;
use crate::scram::file::parse_line;
use crate::scram::{Mechanism, ScramCredential};

const NAME: &str = "redis";
/// The most connections open (and kept) at once.
const POOL_SIZE: usize = 4;
/// The ACL sets of a user (and of `common`), with what their members allow.
const ACL_SETS: [(&str, RuleAccess); 4] = [
    ("sacls", RuleAccess::Read),
    ("racls", RuleAccess::Read),
    ("wacls", RuleAccess::Write),
    ("rwacls", RuleAccess::ReadWrite),
];

/// The Redis backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisSettings {
    /// `redis://[:password@]host:port[/db]` (or `redis://user:password@...` for Redis ACL users).
    pub url: String,
    /// The most one question may take: waiting for a pooled connection, connecting, the round
    /// trip.
    pub timeout: Duration,
    /// How the salts of go-auth PBKDF2 hashes are written (go-auth's `redis_salt_encoding`).
    pub salt_encoding: SaltEncoding,
}

/// Asks a Redis server (see the module documentation).
pub struct RedisBackend {
    client: Client,
    /// `host:port`, for errors.
    address: String,
    timeout: Duration,
    salt_encoding: SaltEncoding,
    idle: Mutex<Vec<Connection>>,
    slots: Slots,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("address", &self.address)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// What Redis holds about one user.
struct UserRecord {
    hash: Option<Vec<u8>>,
    /// Whether the user has SCRAM credentials (`<username>:scram`).
    has_scram: bool,
    superuser: bool,
    /// Each ACL set's key, what its members allow, and its members.
    sets: Vec<(String, RuleAccess, Vec<Vec<u8>>)>,
}

impl UserRecord {
    /// Whether Redis knows the user: a password hash or SCRAM credentials.
    fn exists(&self) -> bool {
        self.hash.is_some() || self.has_scram
    }
}

impl RedisBackend {
    /// Parses the URL and checks the timeout; connects to nothing (the first question does).
    pub fn new(settings: RedisSettings) -> Result<Self, SetupError> {
        check_timeout(NAME, settings.timeout)?;
        let client =
            Client::open(settings.url.as_str()).map_err(|error| SetupError::InvalidUrl {
                backend: NAME,
                url: redact_url(&settings.url).into_owned(),
                reason: error.to_string(),
            })?;
        Ok(Self {
            address: client.get_connection_info().addr().to_string(),
            client,
            timeout: settings.timeout,
            salt_encoding: settings.salt_encoding,
            idle: Mutex::new(Vec::new()),
            slots: Slots::new(POOL_SIZE),
        })
    }

    /// Fetches everything about `username` in one round trip.
    fn fetch(&self, username: &str) -> Result<UserRecord, BackendError> {
        let keys = acl_keys(username);
        let mut pipeline = ::redis::pipe();
        pipeline
            .get(username)
            .get(format!("{username}:su"))
            .exists(format!("{username}:scram"));
        for (key, _) in &keys {
            pipeline.smembers(key);
        }
        let values = self.query(&pipeline)?;
        let mut values = values.into_iter();
        let hash: Option<Vec<u8>> = self.next_value(&mut values)?;
        let superuser: Option<Vec<u8>> = self.next_value(&mut values)?;
        let has_scram: bool = self.next_value(&mut values)?;
        let sets = keys
            .into_iter()
            .map(|(key, access)| Ok((key, access, self.next_value(&mut values)?)))
            .collect::<Result<_, BackendError>>()?;
        Ok(UserRecord {
            hash,
            has_scram,
            superuser: superuser.as_deref() == Some(b"true"),
            sets,
        })
    }

    fn next_value<T: ::redis::FromRedisValue>(
        &self,
        values: &mut impl Iterator<Item = Value>,
    ) -> Result<T, BackendError> {
        let value = values
            .next()
            .ok_or_else(|| self.bad_answer("too few replies"))?;
        ::redis::from_redis_value(value).map_err(|error| self.bad_answer(&error.to_string()))
    }

    /// Runs `pipeline` on a pooled connection (a new one when none is idle); a failure on an
    /// idle connection (closed by the server meanwhile) is tried once more on a new one.
    fn query(&self, pipeline: &Pipeline) -> Result<Vec<Value>, BackendError> {
        let deadline = Instant::now() + self.timeout;
        let _slot = self
            .slots
            .acquire(deadline)
            .ok_or_else(|| self.timeout_error())?;
        let idle = self.lock_idle().pop();
        let (connection, values) = match idle {
            Some(mut connection) => match self.run(&mut connection, pipeline, deadline) {
                Ok(values) => (connection, values),
                Err(error) if error.is_timeout() => return Err(self.error(&error)),
                Err(_) => self.run_on_new_connection(pipeline, deadline)?,
            },
            None => self.run_on_new_connection(pipeline, deadline)?,
        };
        self.lock_idle().push(connection);
        Ok(values)
    }

    fn run_on_new_connection(
        &self,
        pipeline: &Pipeline,
        deadline: Instant,
    ) -> Result<(Connection, Vec<Value>), BackendError> {
        let left = remaining(deadline).ok_or_else(|| self.timeout_error())?;
        let mut connection = self
            .client
            .get_connection_with_timeout(left)
            .map_err(|error| self.error(&error))?;
        let values = self
            .run(&mut connection, pipeline, deadline)
            .map_err(|error| self.error(&error))?;
        Ok((connection, values))
    }

    fn run(
        &self,
        connection: &mut Connection,
        pipeline: &Pipeline,
        deadline: Instant,
    ) -> Result<Vec<Value>, RedisError> {
        let left = remaining(deadline).unwrap_or(Duration::from_millis(1));
        connection.set_read_timeout(Some(left))?;
        connection.set_write_timeout(Some(left))?;
        pipeline.query(connection)
    }

    fn lock_idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, error: &RedisError) -> BackendError {
        if error.is_timeout() {
            return self.timeout_error();
        }
        BackendError::Unavailable {
            backend: NAME,
            detail: format!("{}: {error}", self.address),
        }
    }

    fn timeout_error(&self) -> BackendError {
        timeout_error(NAME, self.timeout)
    }

    fn bad_answer(&self, detail: &str) -> BackendError {
        BackendError::BadAnswer {
            backend: NAME,
            detail: format!("{}: {detail}", self.address),
        }
    }

    /// Whether `password` matches the stored hash of `username`.
    fn password_matches(
        &self,
        username: &str,
        hash: &[u8],
        password: &[u8],
    ) -> Result<bool, BackendError> {
        let unreadable = |problem: String| {
            self.bad_answer(&format!(
                "the password hash of user `{username}`: {problem}"
            ))
        };
        let hash = std::str::from_utf8(hash).map_err(|_| unreadable("not UTF-8".to_owned()))?;
        password_hash::verify(hash, password, self.salt_encoding)
            .map_err(|error| unreadable(error.to_string()))
    }
}

impl Backend for RedisBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn login(&self, request: &LoginRequest) -> Result<LoginAnswer, BackendError> {
        let Some(username) = request.username.as_deref() else {
            return Ok(LoginAnswer::Unknown);
        };
        let record = self.fetch(username)?;
        let Some(hash) = &record.hash else {
            return Ok(LoginAnswer::Unknown);
        };
        let password = request.password.as_deref().unwrap_or_default();
        if !self.password_matches(username, hash, password)? {
            return Ok(LoginAnswer::Deny);
        }
        let client = ClientIdentity {
            client_id: &request.client_id,
            username: Some(username),
        };
        Ok(LoginAnswer::Allow(Grant {
            expires_at: None,
            rules: Some(rules(&record, &client)),
            superuser: record.superuser,
        }))
    }

    fn current_grant(
        &self,
        client_id: &str,
        username: Option<&str>,
    ) -> Result<Option<Grant>, BackendError> {
        let Some(username) = username else {
            return Ok(None);
        };
        let record = self.fetch(username)?;
        if !record.exists() {
            // The user is gone: nothing is granted any more.
            return Ok(Some(Grant {
                rules: Some(Vec::new()),
                ..Grant::default()
            }));
        }
        let client = ClientIdentity {
            client_id,
            username: Some(username),
        };
        Ok(Some(Grant {
            expires_at: None,
            rules: Some(rules(&record, &client)),
            superuser: record.superuser,
        }))
    }

    fn scram_credential(
        &self,
        username: &str,
        mechanism: Mechanism,
    ) -> Result<Option<ScramCredential>, BackendError> {
        let mut pipeline = ::redis::pipe();
        pipeline.hget(format!("{username}:scram"), mechanism.name());
        let values = self.query(&pipeline)?;
        let value: Option<String> = self.next_value(&mut values.into_iter())?;
        let Some(value) = value else {
            return Ok(None);
        };
        let line = format!("{username}:{}:{value}", mechanism.name());
        let (_, credential) = parse_line(&line).map_err(|problem| {
            self.bad_answer(&format!(
                "the {} credential of user `{username}`: {problem}",
                mechanism.name()
            ))
        })?;
        Ok(Some(credential))
    }

    fn check_acl(&self, request: &AclRequest) -> Result<AclAnswer, BackendError> {
        let Some(username) = request.username.as_deref() else {
            return Ok(AclAnswer::Unknown);
        };
        let record = self.fetch(username)?;
        if !record.exists() {
            return Ok(AclAnswer::Unknown);
        }
        let client = ClientIdentity {
            client_id: &request.client_id,
            username: Some(username),
        };
        Ok(
            if record.superuser || allows(&rules(&record, &client), request) {
                AclAnswer::Allow
            } else {
                AclAnswer::Deny
            },
        )
    }
}

/// The keys of the ACL sets that apply to `username`: its own, then `common:`'s.
fn acl_keys(username: &str) -> Vec<(String, RuleAccess)> {
    [username, "common"]
        .into_iter()
        .flat_map(|owner| {
            ACL_SETS
                .iter()
                .map(move |(suffix, access)| (format!("{owner}:{suffix}"), *access))
        })
        .collect()
}

/// The rules of every set member, `%u` and `%c` substituted; a member that is not a valid
/// filter is skipped with a warning.
fn rules(record: &UserRecord, client: &ClientIdentity<'_>) -> Vec<TopicRule> {
    let mut rules = Vec::new();
    for (key, access, members) in &record.sets {
        for member in members {
            let member = String::from_utf8_lossy(member);
            let made = substitute(&member, client)
                .map_err(str::to_owned)
                .and_then(|filter| rule(&filter, *access).map_err(|error| error.to_string()));
            match made {
                Ok(rule) => rules.push(rule),
                Err(reason) => {
                    tracing::warn!(key = %key, member = %member, "redis: ACL member skipped: {reason}");
                }
            }
        }
    }
    rules
}

#[cfg(test)]
#[path = "redis_tests.rs"]
mod tests;
