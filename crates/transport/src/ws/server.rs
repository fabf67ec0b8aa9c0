//! The server side of MQTT over WebSocket: tungstenite's server handshake checks the upgrade
//! request (path and subprotocol); frames are then read by [`FrameReader`], which hands binary
//! payload to MQTT as it arrives and assembles no message; outbound MQTT bytes leave as one
//! binary frame per turn, with tungstenite's frame header.

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
use super::reader::{FrameReader, Reading, goodbye};
use crate::config::AllowedOrigins;
use crate::stack::WsHalf;

/// Subprotocols accepted, in order of preference (`mqttv3.1` is what MQTT 3.1 clients send).
const SUBPROTOCOLS: [&str; 2] = ["mqtt", "mqttv3.1"];

/// The largest upgrade request accepted (headers included).
const MAX_UPGRADE_REQUEST: usize = 8 * 1024;

/// Where a WebSocket listener serves MQTT: its path and the origins it accepts.
#[derive(Debug, Clone)]
pub struct WsEndpoint {
    path: Arc<str>,
    origins: Arc<AllowedOrigins>,
}

impl WsEndpoint {
    /// The endpoint at `path` accepting `origins`.
    pub fn new(path: &str, origins: &AllowedOrigins) -> Self {
        Self {
            path: Arc::from(path),
            origins: Arc::new(origins.clone()),
        }
    }
}

/// Checks the upgrade request: the configured path, the `Origin` header a browser sends, and
/// the `mqtt` subprotocol.
struct Upgrade {
    endpoint: WsEndpoint,
}

impl Callback for Upgrade {
    fn on_request(
        self,
        request: &Request,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        let path = &self.endpoint.path;
        if request.uri().path() != &**path {
            return Err(refusal(
                StatusCode::NOT_FOUND,
                format!(
                    "no MQTT endpoint at {} (it is at {path})",
                    request.uri().path(),
                ),
            ));
        }
        let origin = request
            .headers()
            .get("Origin")
            .map(|o| o.to_str().unwrap_or("?"));
        if !self.endpoint.origins.admit(origin) {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                format!(
                    "origin {} is not among the listener's allowed_origins",
                    origin.unwrap_or_default()
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

/// The end of an upgrade request's headers.
const END_OF_REQUEST: &[u8; 4] = b"\r\n\r\n";

/// Where a session is.
enum Phase {
    /// The upgrade request is arriving (tungstenite's handshake is in the session).
    Upgrading,
    /// Upgraded: frames are read.
    Open(FrameReader),
    /// Failed or closed: nothing more is read or written.
    Done,
}

/// One connection's WebSocket side.
pub struct WsSession {
    /// The pipe the handshake reads and writes, and the handshake until it completes.
    session: Session<Handshake>,
    phase: Phase,
    max_message: usize,
    /// Bytes of the upgrade request so far.
    upgrade_bytes: usize,
    /// How much of [`END_OF_REQUEST`] the request's last bytes matched.
    matched: usize,
}

impl WsSession {
    /// A session waiting for its upgrade request at `endpoint`; messages above `max_message`
    /// bytes are refused (close 1009) as soon as their fragments announce more.
    pub(crate) fn new(endpoint: WsEndpoint, max_message: usize) -> Self {
        let config = WebSocketConfig::default()
            // The socket tungstenite hands over is dropped at once (frames are read by
            // `FrameReader`): it should allocate little.
            .read_buffer_size(256)
            .write_buffer_size(0);
        let Ok(session) = Session::start(|stream| {
            Ok::<_, Infallible>(ServerHandshake::start(
                stream,
                Upgrade { endpoint },
                Some(config),
            ))
        });
        Self {
            session,
            phase: Phase::Upgrading,
            max_message,
            upgrade_bytes: 0,
            matched: 0,
        }
    }

    /// Bytes this session keeps between reads: the upgrade request so far (tungstenite's
    /// buffer), then a partial frame header and control payload. A binary frame's payload is
    /// never kept: it went to MQTT.
    pub(crate) fn held(&self) -> usize {
        match &self.phase {
            Phase::Upgrading => self.upgrade_bytes,
            Phase::Open(reader) => reader.held(),
            Phase::Done => 0,
        }
    }

    /// Feeds the upgrade request's bytes of `input` to the handshake (never the frames behind
    /// it: tungstenite would keep them in a socket this session does not use); once it
    /// completes, the rest of `input` is read as frames.
    fn upgrade(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        let end = self.request_end(input);
        let (request, frames) = input.split_at(end.unwrap_or(input.len()));
        self.upgrade_bytes += request.len();
        if self.upgrade_bytes > MAX_UPGRADE_REQUEST {
            self.phase = Phase::Done;
            return Err(LayerError::new(format!(
                "WebSocket upgrade request longer than {MAX_UPGRADE_REQUEST} bytes"
            )));
        }
        self.session.feed(request);
        let State::Upgrading(handshake) = std::mem::replace(&mut self.session.state, State::Done)
        else {
            self.phase = Phase::Done;
            return Err(LayerError::new("WebSocket upgrade without a handshake"));
        };
        let result = handshake.handshake();
        reply.extend_from_slice(&self.session.take_output());
        match result {
            // The socket is not used: frames are read by `FrameReader`.
            Ok(_socket) => {
                self.phase = Phase::Open(FrameReader::new(self.max_message));
                self.upgrade_bytes = 0;
                self.read(frames, plain, reply)
            }
            Err(HandshakeError::Interrupted(_)) if end.is_some() => {
                self.phase = Phase::Done;
                Err(LayerError::new(
                    "WebSocket upgrade incomplete after its request",
                ))
            }
            Err(HandshakeError::Interrupted(handshake)) => {
                self.session.state = State::Upgrading(Box::new(handshake));
                Ok(LayerState::Open)
            }
            Err(HandshakeError::Failure(error)) => {
                self.phase = Phase::Done;
                Err(upgrade_error(error))
            }
        }
    }

    /// Where in `input` the upgrade request ends (after its blank line), if it does.
    fn request_end(&mut self, input: &[u8]) -> Option<usize> {
        for (at, &byte) in input.iter().enumerate() {
            self.matched = if byte == END_OF_REQUEST[self.matched] {
                self.matched + 1
            } else {
                usize::from(byte == END_OF_REQUEST[0])
            };
            if self.matched == END_OF_REQUEST.len() {
                return Some(at + 1);
            }
        }
        None
    }

    /// Reads frames from `input` in an open session.
    fn read(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        let Phase::Open(reader) = &mut self.phase else {
            return Ok(LayerState::PeerClosed);
        };
        match reader.read(input, plain, reply) {
            Ok(Reading::Open) => Ok(LayerState::Open),
            Ok(Reading::Closed) => {
                self.phase = Phase::Done;
                Ok(LayerState::PeerClosed)
            }
            Err(refusal) => {
                self.phase = Phase::Done;
                Err(LayerError::new(refusal.to_string()))
            }
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
        match self.phase {
            Phase::Upgrading => self.upgrade(input, plain, reply),
            Phase::Open(_) => self.read(input, plain, reply),
            Phase::Done => Ok(LayerState::PeerClosed),
        }
    }

    /// Frames a turn's MQTT bytes as one binary message into `wire`.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        if plain.iter().all(Bytes::is_empty) {
            return Ok(());
        }
        if !matches!(self.phase, Phase::Open(_)) {
            return Err(LayerError::new(
                "MQTT bytes queued before the WebSocket upgrade",
            ));
        }
        binary_frame(plain, None, wire)
    }

    /// A close frame, when the session is open.
    fn close(&mut self, wire: &mut BytesMut) {
        if let Phase::Open(_) = self.phase {
            goodbye(wire);
        }
        self.phase = Phase::Done;
    }

    fn held(&self) -> usize {
        WsSession::held(self)
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
