//! The HTTP backend, in mosquitto-go-auth's convention: each question is a JSON POST and any 2xx
//! status means yes.
//!
//! - Login: `login_url` gets `{"clientid","username","password","peer"}` (`peer` is
//!   `ip:port`; a password that is not UTF-8 goes as `"password_base64"` instead).
//! - Topic check: `acl_url` gets `{"clientid","username","peer","topic","acc"}` with `acc` 1
//!   (receive), 2 (publish) or 4 (subscribe). Without `acl_url` the backend has no opinion.
//! - AUTH exchange (MQTT 5 enhanced authentication) of the methods in `auth_methods`: each
//!   round is POSTed to `auth_exchange_url` (see `exchange.rs` for the JSON both ways); a non-2xx
//!   status refuses.
//!
//! Connections are kept alive and reused; at most `max_concurrent` requests are in flight, and
//! waiting for one of those slots counts against the timeout.

use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use broker_api::redact_url;
use serde_json::{Value, json};
use ureq::Agent;

use super::exchange::{read_answer, round_body};
use super::setup::{SetupError, check_timeout};
use super::slots::{Slots, remaining, timeout_error};
use super::{
    AclAnswer, AclRequest, Backend, BackendError, ExchangeAnswer, ExchangeRound, Grant,
    LoginAnswer, LoginRequest, TopicAccess,
};

const NAME: &str = "http";
/// The most of an answer's body read (and ignored) so that its connection can be reused.
const MAX_BODY: u64 = 64 * 1024;

/// The HTTP backend's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSettings {
    /// Where logins are POSTed (`http://` or `https://`).
    pub login_url: String,
    /// Where topic checks are POSTed; `None`: topic checks get no opinion.
    pub acl_url: Option<String>,
    /// The most one question may take, waiting for a free slot included.
    pub timeout: Duration,
    /// The most requests in flight at once (at least 1).
    pub max_concurrent: usize,
    /// `auth_exchange_url` and `auth_methods`: the AUTH exchanges this backend drives.
    pub exchange: Option<HttpExchange>,
}

/// Where the rounds of the AUTH exchanges this backend drives are POSTed, and their methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpExchange {
    /// `auth_exchange_url`.
    pub url: String,
    /// `auth_methods`: the Authentication Methods it drives.
    pub methods: Vec<String>,
}

/// Asks an HTTP service (see the module documentation).
#[derive(Debug)]
pub struct HttpBackend {
    agent: Agent,
    login_url: String,
    acl_url: Option<String>,
    exchange: Option<HttpExchange>,
    timeout: Duration,
    slots: Slots,
}

impl HttpBackend {
    /// Checks the URLs and the timeout and makes the (keep-alive) client; connects to nothing.
    pub fn new(settings: HttpSettings) -> Result<Self, SetupError> {
        check_timeout(NAME, settings.timeout)?;
        check_url(&settings.login_url)?;
        if let Some(url) = &settings.acl_url {
            check_url(url)?;
        }
        if let Some(exchange) = &settings.exchange {
            check_url(&exchange.url)?;
        }
        let max_concurrent = settings.max_concurrent.max(1);
        let agent = Agent::config_builder()
            .http_status_as_error(false)
            // A redirect is an answer like any other non-2xx: a refusal.
            .max_redirects(0)
            .timeout_global(Some(settings.timeout))
            .max_idle_connections(max_concurrent)
            .max_idle_connections_per_host(max_concurrent)
            .build()
            .new_agent();
        Ok(Self {
            agent,
            login_url: settings.login_url,
            acl_url: settings.acl_url,
            exchange: settings.exchange,
            timeout: settings.timeout,
            slots: Slots::new(max_concurrent),
        })
    }

    /// POSTs `body` to `url`; whether the answer's status is 2xx.
    fn post(&self, url: &str, body: &Value) -> Result<bool, BackendError> {
        Ok(self.post_for_body(url, body)?.is_some())
    }

    /// POSTs `body` to `url`; a 2xx answer's body (at most `MAX_BODY` bytes), `None` for any
    /// other status.
    fn post_for_body(&self, url: &str, body: &Value) -> Result<Option<Vec<u8>>, BackendError> {
        let deadline = Instant::now() + self.timeout;
        let _slot = self
            .slots
            .acquire(deadline)
            .ok_or_else(|| self.timeout_error())?;
        let left = remaining(deadline).ok_or_else(|| self.timeout_error())?;
        let response = self
            .agent
            .post(url)
            .config()
            .timeout_global(Some(left))
            .build()
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .map_err(|error| self.request_error(url, error))?;
        let allowed = response.status().is_success();
        // The body is read (also when ignored) so that the connection goes back to the pool.
        let read = response
            .into_body()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec();
        match (allowed, read) {
            (true, Ok(bytes)) => Ok(Some(bytes)),
            (true, Err(error)) => Err(self.request_error(url, error)),
            (false, _) => Ok(None),
        }
    }

    fn timeout_error(&self) -> BackendError {
        timeout_error(NAME, self.timeout)
    }

    fn request_error(&self, url: &str, error: ureq::Error) -> BackendError {
        match error {
            ureq::Error::Timeout(_) => self.timeout_error(),
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                self.timeout_error()
            }
            other => BackendError::Unavailable {
                backend: NAME,
                detail: format!("POST {}: {other}", redact_url(url)),
            },
        }
    }
}

impl Backend for HttpBackend {
    fn name(&self) -> &'static str {
        NAME
    }

    fn checks_topics(&self) -> bool {
        self.acl_url.is_some()
    }

    fn login(&self, request: &LoginRequest) -> Result<LoginAnswer, BackendError> {
        let allowed = self.post(&self.login_url, &login_body(request))?;
        Ok(if allowed {
            LoginAnswer::Allow(Grant::default())
        } else {
            LoginAnswer::Deny
        })
    }

    fn drives_method(&self, method: &str) -> bool {
        self.exchange
            .as_ref()
            .is_some_and(|exchange| exchange.methods.iter().any(|m| m == method))
    }

    fn exchange_round(&self, round: &ExchangeRound) -> Result<ExchangeAnswer, BackendError> {
        let Some(exchange) = &self.exchange else {
            return Ok(ExchangeAnswer::Deny);
        };
        match self.post_for_body(&exchange.url, &round_body(round))? {
            Some(body) => read_answer(&body).map_err(|detail| BackendError::BadAnswer {
                backend: NAME,
                detail,
            }),
            None => Ok(ExchangeAnswer::Deny),
        }
    }

    fn check_acl(&self, request: &AclRequest) -> Result<AclAnswer, BackendError> {
        let Some(url) = &self.acl_url else {
            return Ok(AclAnswer::Unknown);
        };
        Ok(if self.post(url, &acl_body(request))? {
            AclAnswer::Allow
        } else {
            AclAnswer::Deny
        })
    }
}

/// The JSON of a login question.
fn login_body(request: &LoginRequest) -> Value {
    let mut body = json!({
        "clientid": request.client_id,
        "username": request.username.as_deref().unwrap_or(""),
        "peer": request.peer.to_string(),
    });
    let password = request.password.as_deref().unwrap_or_default();
    match std::str::from_utf8(password) {
        Ok(text) => body["password"] = json!(text),
        Err(_) => body["password_base64"] = json!(BASE64.encode(password)),
    }
    body
}

/// The JSON of a topic check.
fn acl_body(request: &AclRequest) -> Value {
    json!({
        "clientid": request.client_id,
        "username": request.username.as_deref().unwrap_or(""),
        "peer": request.peer.to_string(),
        "topic": request.topic,
        "acc": acc_code(request.access),
    })
}

/// mosquitto's access codes, as mosquitto-go-auth sends them.
fn acc_code(access: TopicAccess) -> u8 {
    match access {
        TopicAccess::Receive => 1,
        TopicAccess::Publish => 2,
        TopicAccess::Subscribe => 4,
    }
}

fn check_url(url: &str) -> Result<(), SetupError> {
    let invalid = |reason: String| SetupError::InvalidUrl {
        backend: NAME,
        url: redact_url(url).into_owned(),
        reason,
    };
    let uri: ureq::http::Uri = url.parse().map_err(|error| invalid(format!("{error}")))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(invalid("expected an http:// or https:// URL".to_owned())),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("no host".to_owned()));
    }
    Ok(())
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
