//! The JWT backend: the client presents a signed token (in its CONNECT password or username)
//! that the broker verifies with a configured key, without asking anyone.
//!
//! HS256 (shared secret), RS256 and ES256 (public keys in PEM) are accepted, each only when its
//! key is configured: the token's header picks the key, never the other way round, so an HS256
//! token is not checked against an RS256 public key used as a secret. `exp` and `nbf` are
//! checked with `leeway`; `iss` and `aud` when configured (then the token must carry them).
//! The publish and subscribe claims (arrays of topic filters) become the client's rules.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use super::rules::rule;
use super::setup::SetupError;
use super::{
    AclAnswer, AclRequest, Backend, BackendError, Grant, LoginAnswer, LoginRequest, RuleAccess,
    TopicRule,
};

const NAME: &str = "jwt";
/// The largest leeway taken (a larger one is cut to it).
const MAX_LEEWAY_SECS: u64 = 24 * 60 * 60;

/// The claims of a token, as JSON.
type Claims = Map<String, Value>;

/// Which CONNECT field carries the token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TokenSource {
    /// The password (a token that is not UTF-8 is no token).
    #[default]
    Password,
    /// The username.
    Username,
}

/// The JWT backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    /// Which CONNECT field carries the token.
    pub token_from: TokenSource,
    /// The HS256 shared secret (raw bytes); `None`: HS256 tokens are refused.
    pub hs256_secret: Option<Vec<u8>>,
    /// The RS256 public key, PEM (`PUBLIC KEY` or `RSA PUBLIC KEY`); `None`: RS256 refused.
    pub rs256_public_key_pem: Option<Vec<u8>>,
    /// The ES256 (P-256) public key, PEM (`PUBLIC KEY`); `None`: ES256 refused.
    pub es256_public_key_pem: Option<Vec<u8>>,
    /// The `iss` a token must carry; `None`: not checked.
    pub issuer: Option<String>,
    /// A value the token's `aud` must hold; `None`: a token with an `aud` is refused.
    pub audience: Option<String>,
    /// A claim that must equal the CONNECT username; `None`: not checked.
    pub username_claim: Option<String>,
    /// The claim listing the filters the client may publish to (default `publish`).
    pub publish_claim: String,
    /// The claim listing the filters the client may subscribe to (default `subscribe`).
    pub subscribe_claim: String,
    /// How far past `exp` and before `nbf` a token is still taken (whole seconds, at most a
    /// day).
    pub leeway: Duration,
}

impl Default for JwtSettings {
    fn default() -> Self {
        Self {
            token_from: TokenSource::Password,
            hs256_secret: None,
            rs256_public_key_pem: None,
            es256_public_key_pem: None,
            issuer: None,
            audience: None,
            username_claim: None,
            publish_claim: "publish".to_owned(),
            subscribe_claim: "subscribe".to_owned(),
            leeway: Duration::ZERO,
        }
    }
}

/// Verifies tokens (see the module documentation).
pub struct JwtBackend {
    settings: JwtSettings,
    hs256: Option<DecodingKey>,
    rs256: Option<DecodingKey>,
    es256: Option<DecodingKey>,
}

impl std::fmt::Debug for JwtBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtBackend")
            .field("hs256", &self.hs256.is_some())
            .field("rs256", &self.rs256.is_some())
            .field("es256", &self.es256.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a token is refused (logged at debug level).
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("algorithm {0:?} is not configured")]
    Algorithm(Algorithm),
    #[error("{0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    #[error("claim `{0}` is not a non-negative integer")]
    NotATime(&'static str),
    #[error("claim `{0}` does not equal the CONNECT username")]
    Username(String),
    #[error("claim `{0}` is not an array of strings")]
    NotFilters(String),
    #[error("claim `{claim}`: {problem}")]
    Filter {
        claim: String,
        problem: crate::LineProblem,
    },
}

impl JwtBackend {
    /// Loads the configured keys; an error when none is configured or one cannot be used.
    pub fn new(settings: JwtSettings) -> Result<Self, SetupError> {
        let hs256 = settings
            .hs256_secret
            .as_deref()
            .map(hs256_key)
            .transpose()?;
        let rs256 = settings
            .rs256_public_key_pem
            .as_deref()
            .map(|pem| DecodingKey::from_rsa_pem(pem).map_err(|e| invalid_key("RS256", &e)))
            .transpose()?;
        let es256 = settings
            .es256_public_key_pem
            .as_deref()
            .map(|pem| DecodingKey::from_ec_pem(pem).map_err(|e| invalid_key("ES256", &e)))
            .transpose()?;
        if hs256.is_none() && rs256.is_none() && es256.is_none() {
            return Err(SetupError::NoJwtKey);
        }
        Ok(Self {
            settings,
            hs256,
            rs256,
            es256,
        })
    }

    /// The token in the CONNECT field the settings name, if that field holds one.
    fn token<'r>(&self, request: &'r LoginRequest) -> Option<&'r str> {
        let field = match self.settings.token_from {
            TokenSource::Password => std::str::from_utf8(request.password.as_deref()?).ok()?,
            TokenSource::Username => request.username.as_deref()?,
        };
        looks_like_jwt(field).then_some(field)
    }

    /// The key for `algorithm`, when it is one of the three and configured.
    fn key(&self, algorithm: Algorithm) -> Option<&DecodingKey> {
        match algorithm {
            Algorithm::HS256 => self.hs256.as_ref(),
            Algorithm::RS256 => self.rs256.as_ref(),
            Algorithm::ES256 => self.es256.as_ref(),
            _ => None,
        }
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.settings.leeway.as_secs().min(MAX_LEEWAY_SECS);
        validation.validate_nbf = true;
        let mut required: Vec<&str> = Vec::new();
        if let Some(issuer) = &self.settings.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        // Without a configured audience a token that names one is refused (RFC 7519 4.1.3).
        if let Some(audience) = &self.settings.audience {
            validation.set_audience(&[audience]);
            required.push("aud");
        }
        validation.set_required_spec_claims(&required);
        validation
    }

    /// Verifies `token` (already known to be a JWT) for `request`.
    fn verify(&self, token: &str, request: &LoginRequest) -> Result<Grant, Refusal> {
        let header = jsonwebtoken::decode_header(token)?;
        let key = self.key(header.alg).ok_or(Refusal::Algorithm(header.alg))?;
        let claims =
            jsonwebtoken::decode::<Claims>(token, key, &self.validation(header.alg))?.claims;
        // jsonwebtoken skips an `exp` or `nbf` it cannot read as an integer: refuse those.
        let expires_at = time_claim(&claims, "exp")?;
        time_claim(&claims, "nbf")?;
        self.check_username(&claims, request)?;
        Ok(Grant {
            expires_at,
            rules: self.rules(&claims)?,
            superuser: false,
        })
    }

    fn check_username(&self, claims: &Claims, request: &LoginRequest) -> Result<(), Refusal> {
        let Some(name) = &self.settings.username_claim else {
            return Ok(());
        };
        let claimed = claims.get(name).and_then(Value::as_str);
        match (claimed, request.username.as_deref()) {
            (Some(claimed), Some(username)) if claimed == username => Ok(()),
            _ => Err(Refusal::Username(name.clone())),
        }
    }

    /// The publish claim's filters as write rules and the subscribe claim's as read rules;
    /// `None` when the token has neither claim.
    fn rules(&self, claims: &Claims) -> Result<Option<Vec<TopicRule>>, Refusal> {
        let publish = claim_rules(claims, &self.settings.publish_claim, RuleAccess::Write)?;
        let subscribe = claim_rules(claims, &self.settings.subscribe_claim, RuleAccess::Read)?;
        if publish.is_none() && subscribe.is_none() {
            return Ok(None);
        }
        Ok(Some(
            publish.into_iter().chain(subscribe).flatten().collect(),
        ))
    }
}

impl Backend for JwtBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn login(&self, request: &LoginRequest) -> Result<LoginAnswer, BackendError> {
        let Some(token) = self.token(request) else {
            return Ok(LoginAnswer::Unknown);
        };
        match self.verify(token, request) {
            Ok(grant) => Ok(LoginAnswer::Allow(grant)),
            Err(refusal) => {
                tracing::debug!(client_id = %request.client_id, "jwt: token refused: {refusal}");
                Ok(LoginAnswer::Deny)
            }
        }
    }

    /// A token carries its rules at login; the backend has nothing to say about a single topic.
    fn check_acl(&self, _request: &AclRequest) -> Result<AclAnswer, BackendError> {
        Ok(AclAnswer::Unknown)
    }
}

fn hs256_key(secret: &[u8]) -> Result<DecodingKey, SetupError> {
    if secret.is_empty() {
        return Err(SetupError::InvalidKey {
            algorithm: "HS256",
            reason: "the secret is empty".to_owned(),
        });
    }
    Ok(DecodingKey::from_secret(secret))
}

fn invalid_key(algorithm: &'static str, error: &jsonwebtoken::errors::Error) -> SetupError {
    SetupError::InvalidKey {
        algorithm,
        reason: error.to_string(),
    }
}

/// Whether `text` has a JWT's shape: three non-empty base64url parts separated by dots.
fn looks_like_jwt(text: &str) -> bool {
    let is_base64url = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let parts: Vec<&str> = text.split('.').collect();
    parts.len() == 3 && parts.iter().all(|part| is_base64url(part))
}

/// A NumericDate claim as a time; `None` when absent.
fn time_claim(claims: &Claims, name: &'static str) -> Result<Option<SystemTime>, Refusal> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let seconds = value.as_u64().ok_or(Refusal::NotATime(name))?;
    UNIX_EPOCH
        .checked_add(Duration::from_secs(seconds))
        .map(Some)
        .ok_or(Refusal::NotATime(name))
}

/// The rules of one claim (an array of topic filters); `None` when the token lacks the claim.
fn claim_rules(
    claims: &Claims,
    name: &str,
    access: RuleAccess,
) -> Result<Option<Vec<TopicRule>>, Refusal> {
    let Some(value) = claims.get(name) else {
        return Ok(None);
    };
    let not_filters = || Refusal::NotFilters(name.to_owned());
    let filters = value.as_array().ok_or_else(not_filters)?;
    filters
        .iter()
        .map(|filter| {
            let filter = filter.as_str().ok_or_else(not_filters)?;
            rule(filter, access).map_err(|problem| Refusal::Filter {
                claim: name.to_owned(),
                problem,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;
