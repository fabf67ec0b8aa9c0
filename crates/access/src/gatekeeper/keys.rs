//! Cache keys for backend answers. A login is cached under a digest of its password, never
//! the password itself.

use ring::digest::{SHA256, digest};

use crate::backend::{AclRequest, LoginRequest, TopicAccess};

/// A login's cache key: the same client id, username and password, asked from the same
/// point of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LoginKey {
    client_id: String,
    username: Option<String>,
    password_digest: Option<[u8; 32]>,
    start: usize,
}

impl LoginKey {
    pub fn of(request: &LoginRequest, start: usize) -> Self {
        let password_digest = request.password.as_deref().map(|password| {
            let mut out = [0u8; 32];
            out.copy_from_slice(digest(&SHA256, password).as_ref());
            out
        });
        Self {
            client_id: request.client_id.clone(),
            username: request.username.clone(),
            password_digest,
            start,
        }
    }
}

/// A topic check's cache key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclKey {
    client_id: String,
    username: Option<String>,
    topic: String,
    access: TopicAccess,
}

impl AclKey {
    pub fn of(request: &AclRequest) -> Self {
        Self {
            client_id: request.client_id.clone(),
            username: request.username.clone(),
            topic: request.topic.clone(),
            access: request.access,
        }
    }

    /// The key for a check not yet made into a request.
    pub fn new(client_id: &str, username: Option<&str>, topic: &str, access: TopicAccess) -> Self {
        Self {
            client_id: client_id.to_owned(),
            username: username.map(str::to_owned),
            topic: topic.to_owned(),
            access,
        }
    }
}
