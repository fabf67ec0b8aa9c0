//! Who may use `/metrics` and `/api/`: a bearer token and/or HTTP basic credentials, compared
//! in constant time (over SHA-256 digests, so neither the length nor the content of a secret
//! shows in the time a refusal takes).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::digest::{SHA256, digest};

use broker_api::Secret;

use crate::settings::{BasicCredentials, HttpSettings};

/// The credentials requests are checked against.
#[derive(Debug, Clone)]
pub struct Credentials {
    token: Option<Secret>,
    basic: Option<BasicCredentials>,
}

impl Credentials {
    /// The credentials of `[http]`.
    pub fn new(settings: &HttpSettings) -> Self {
        Self {
            token: settings.token.clone(),
            basic: settings.basic.clone(),
        }
    }

    /// Whether a request with this `Authorization` value may pass: always when no
    /// credentials are configured.
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        if self.token.is_none() && self.basic.is_none() {
            return true;
        }
        let Some((scheme, value)) = authorization.and_then(|a| a.trim().split_once(' ')) else {
            return false;
        };
        let value = value.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self
                .token
                .as_ref()
                .is_some_and(|token| same(value.as_bytes(), token.0.as_bytes()));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            return self
                .basic
                .as_ref()
                .is_some_and(|basic| basic_matches(basic, value));
        }
        false
    }

    /// Whether the dashboard's files (which hold no data) are served without credentials:
    /// unless basic credentials are configured, which the browser asks for and then replays.
    /// With a bearer token alone the page asks for the token itself.
    pub fn page_open(&self) -> bool {
        self.basic.is_none()
    }

    /// The `WWW-Authenticate` challenges of a 401.
    pub fn challenges(&self) -> Vec<(&'static str, String)> {
        let mut challenges = Vec::new();
        if self.token.is_some() {
            challenges.push(("WWW-Authenticate", "Bearer realm=\"ringmq\"".to_owned()));
        }
        if self.basic.is_some() {
            challenges.push((
                "WWW-Authenticate",
                "Basic realm=\"ringmq\", charset=\"UTF-8\"".to_owned(),
            ));
        }
        challenges
    }
}

/// Whether base64 `encoded` is `username:password` of `basic`; both halves are always
/// compared.
fn basic_matches(basic: &BasicCredentials, encoded: &str) -> bool {
    let Ok(decoded) = STANDARD.decode(encoded) else {
        return false;
    };
    let Some(colon) = decoded.iter().position(|b| *b == b':') else {
        return false;
    };
    let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
    let user_ok = same(user, basic.username.as_bytes());
    let password_ok = same(password, basic.password.0.as_bytes());
    user_ok & password_ok
}

/// Constant-time equality of two byte strings, through their digests.
fn same(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (digest(&SHA256, a), digest(&SHA256, b));
    let difference = a
        .as_ref()
        .iter()
        .zip(b.as_ref())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(token: Option<&str>, basic: Option<(&str, &str)>) -> Credentials {
        let mut settings = HttpSettings::for_tests();
        settings.token = token.map(|t| Secret(t.to_owned()));
        settings.basic = basic.map(|(username, password)| BasicCredentials {
            username: username.to_owned(),
            password: Secret(password.to_owned()),
        });
        Credentials::new(&settings)
    }

    #[test]
    fn nothing_configured_admits_everyone() {
        assert!(credentials(None, None).admits(None));
    }

    #[test]
    fn bearer_token_must_match_exactly() {
        let c = credentials(Some("s3cret"), None);
        assert!(c.admits(Some("Bearer s3cret")));
        assert!(c.admits(Some("bearer s3cret")));
        assert!(!c.admits(None));
        assert!(!c.admits(Some("Bearer s3cre")));
        assert!(!c.admits(Some("Bearer s3cret2")));
        assert!(!c.admits(Some("Basic czNjcmV0")));
        assert!(!c.admits(Some("s3cret")));
    }

    #[test]
    fn basic_credentials_must_match_both_halves() {
        let c = credentials(None, Some(("ops", "pa:ss")));
        let header = |text: &str| format!("Basic {}", STANDARD.encode(text));
        assert!(c.admits(Some(&header("ops:pa:ss"))));
        assert!(!c.admits(Some(&header("ops:pa"))));
        assert!(!c.admits(Some(&header("opz:pa:ss"))));
        assert!(!c.admits(Some("Basic !!!")));
        assert!(!c.admits(Some("Bearer pa:ss")));
        assert_eq!(c.challenges().len(), 1);
    }
}
