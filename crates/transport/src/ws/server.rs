//! The server side of MQTT over WebSocket: tungstenite's server handshake checks the upgrade
//! request (path and subprotocol); outbound MQTT bytes leave as one binary frame per turn,
//! with tungstenite's frame header.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use tungstenite::handshake::HandshakeError;
use tungstenite::handshake::MidHandshake;
use tungstenite::handshake::server::{Callback, ErrorResponse, Request, Response, ServerHandshake};
use tungstenite::http::{HeaderValue, StatusCode};
use tungstenite::protocol::WebSocketConfig;

use super::pipe::{PipeStream, Session, State, binary_frame};
use crate::stack::WsHalf;

/// Subprotocols accepted, in order of preference (`mqttv3.1` is what MQTT 3.1 clients send).
const SUBPROTOCOLS: [&str; 2] = ["mqtt", "mqttv3.1"];

/// The largest upgrade request accepted (headers included).
const MAX_UPGRADE_REQUEST: usize = 8 * 1024;

/// Checks the upgrade request: the configured path and the `mqtt` subprotocol.
struct Upgrade {
    path: Arc<str>,
}

impl Callback for Upgrade {
    fn on_request(
        self,
        request: &Request,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        if request.uri().path() != &*self.path {
            return Err(refusal(
                StatusCode::NOT_FOUND,
                format!(
                    "no MQTT endpoint at {} (it is at {})",
                    request.uri().path(),
                    self.path
                ),
            ));
        }
        let offered: Vec<&str> = request
            .headers()
            .get_all("Sec-WebSocket-Protocol")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|list| list.split(',').map(str::trim))
            .collect();
        let Some(chosen) = SUBPROTOCOLS.iter().find(|p| offered.contains(p)) else {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                "the upgrade does not offer the `mqtt` WebSocket subprotocol".to_owned(),
            ));
        };
        response
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(chosen));
        Ok(response)
    }
}

fn refusal(status: StatusCode, reason: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(reason));
    *response.status_mut() = status;
    response
}

type Handshake = MidHandshake<ServerHandshake<PipeStream, Upgrade>>;

/// One connection's WebSocket side.
pub struct WsSession {
    session: Session<Handshake>,
    upgrade_bytes: usize,
}

impl WsSession {
    /// A session waiting for its upgrade request at `path`; messages above `max_message`
    /// bytes are refused.
    pub(crate) fn new(path: Arc<str>, max_message: usize) -> Self {
        let config = WebSocketConfig::default()
            // tungstenite allocates its read buffer up front: small, since an idle connection
            // keeps it (a larger frame reserves what it needs).
            .read_buffer_size(256)
            .write_buffer_size(0)
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let Ok(session) = Session::start(|stream| {
            Ok::<_, Infallible>(ServerHandshake::start(
                stream,
                Upgrade { path },
                Some(config),
            ))
        });
        Self {
            session,
            upgrade_bytes: 0,
        }
    }

    fn upgrade(&mut self, handshake: Handshake) -> Result<LayerState, LayerError> {
        match handshake.handshake() {
            Ok(socket) => {
                self.session.state = State::Open(Box::new(socket));
                Ok(LayerState::Open)
            }
            Err(HandshakeError::Interrupted(handshake)) => {
                if self.upgrade_bytes > MAX_UPGRADE_REQUEST {
                    return Err(LayerError::new(format!(
                        "WebSocket upgrade request longer than {MAX_UPGRADE_REQUEST} bytes"
                    )));
                }
                self.session.state = State::Upgrading(Box::new(handshake));
                Ok(LayerState::Open)
            }
            Err(HandshakeError::Failure(error)) => Err(upgrade_error(error)),
        }
    }
}

impl WsHalf for WsSession {
    /// Feeds received bytes: MQTT bytes go to `plain`, handshake answers, pongs and close
    /// replies to `reply`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        self.session.feed(input);
        let result = match std::mem::replace(&mut self.session.state, State::Done) {
            State::Upgrading(handshake) => {
                self.upgrade_bytes += input.len();
                self.upgrade(*handshake)
            }
            State::Open(socket) => self.session.read_frames(socket, plain),
            State::Done => Ok(LayerState::PeerClosed),
        };
        reply.extend_from_slice(&self.session.take_output());
        result
    }

    /// Frames a turn's MQTT bytes as one binary message into `wire`.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        if plain.iter().all(Bytes::is_empty) {
            return Ok(());
        }
        if !matches!(self.session.state, State::Open(_)) {
            return Err(LayerError::new(
                "MQTT bytes queued before the WebSocket upgrade",
            ));
        }
        binary_frame(plain, None, wire)
    }

    fn close(&mut self, wire: &mut BytesMut) {
        self.session.close(wire);
    }
}

/// A failed upgrade, with the reason the refusal carried.
fn upgrade_error(error: tungstenite::Error) -> LayerError {
    if let tungstenite::Error::Http(response) = &error {
        let reason = response
            .body()
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        return LayerError::new(format!(
            "WebSocket upgrade refused ({}): {reason}",
            response.status()
        ));
    }
    LayerError::new(format!("WebSocket upgrade failed: {error}"))
}
