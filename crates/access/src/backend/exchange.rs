//! MQTT 5 enhanced authentication through a backend: one round of an AUTH exchange that a
//! backend drives (HTTP's `auth_exchange_url`), and the backend's answer.
//!
//! HTTP's JSON: each round POSTs `{"method", "clientid", "username", "peer", "round",
//! "reauth", "data", "state"}` (`data`: the client's Authentication Data in base64, or null;
//! `round` 0 at CONNECT or AUTH 0x19, then 1, 2...; `state`: what the previous answer asked to
//! get back, or null). A 2xx answer's body is one of `{"result": "continue", "data": B64,
//! "state": S}`, `{"result": "success", "data": B64, "username": U}` (both optional) and
//! `{"result": "deny"}`; any other status denies.

use std::net::SocketAddr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

/// One round of an exchange: what the client sent, and where the exchange stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExchangeRound {
    /// The Authentication Method.
    pub method: String,
    /// The client identifier of the CONNECT.
    pub client_id: String,
    /// The CONNECT username, if any.
    pub username: Option<String>,
    /// The client's Authentication Data in this round (CONNECT's, then each AUTH's).
    pub data: Option<Vec<u8>>,
    /// The round: 0 for the CONNECT (or the AUTH 0x19 of a re-authentication), then 1, 2...
    pub round: u8,
    /// What the backend asked to get back (its answer's `state` in the previous round).
    pub state: Option<String>,
    /// Whether this is a re-authentication of a connected client.
    pub reauthenticating: bool,
    /// The client's address.
    pub peer: SocketAddr,
}

/// A backend's answer to one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExchangeAnswer {
    /// Send AUTH 0x18 with `data` and wait for the client's next round; `state` comes back in
    /// it.
    Continue {
        data: Vec<u8>,
        state: Option<String>,
    },
    /// Authenticated: CONNACK 0x00 (or AUTH 0x00) with `data` if any; `username`, when given,
    /// is the user the session belongs to (else the CONNECT's).
    Success {
        data: Option<Vec<u8>>,
        username: Option<String>,
    },
    /// Refused: CONNACK 0x87 (or DISCONNECT 0x87).
    Deny,
}

/// The JSON POSTed for `round`.
pub(super) fn round_body(round: &ExchangeRound) -> Value {
    json!({
        "method": round.method,
        "clientid": round.client_id,
        "username": round.username.as_deref().unwrap_or(""),
        "peer": round.peer.to_string(),
        "round": round.round,
        "reauth": round.reauthenticating,
        "data": round.data.as_ref().map(|data| BASE64.encode(data)),
        "state": round.state,
    })
}

/// A 2xx answer's body; an error says what is wrong with it.
pub(super) fn read_answer(body: &[u8]) -> Result<ExchangeAnswer, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|error| format!("AUTH round answer: {error}"))?;
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let data = match text("data") {
        Some(data) => Some(
            BASE64
                .decode(data)
                .map_err(|_| "AUTH round answer: `data` is not base64".to_owned())?,
        ),
        None => None,
    };
    match text("result").as_deref() {
        Some("continue") => Ok(ExchangeAnswer::Continue {
            data: data.unwrap_or_default(),
            state: text("state"),
        }),
        Some("success") => Ok(ExchangeAnswer::Success {
            data,
            username: text("username"),
        }),
        Some("deny") => Ok(ExchangeAnswer::Deny),
        _ => Err("AUTH round answer: `result` is not continue, success or deny".to_owned()),
    }
}

#[cfg(test)]
#[path = "exchange_tests.rs"]
mod tests;
