//! The client side of MQTT over WebSocket: tungstenite's client handshake (the upgrade request
//! goes out with the first send, the MQTT bytes of that turn wait for its answer), one masked
//! binary frame per turn.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use ring_runtime::{LayerError, LayerState};
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::http::HeaderValue;
use tungstenite::protocol::WebSocketConfig;

use super::pipe::{PipeStream, Session, State, binary_frame};
use crate::error::ClientError;
use crate::stack::WsHalf;

/// The WebSocket subprotocol offered in the upgrade request.
const SUBPROTOCOL: &str = "mqtt";

type Handshake = MidHandshake<ClientHandshake<PipeStream>>;

/// One connection's WebSocket client side.
pub struct WsClient {
    session: Session<Handshake>,
    /// MQTT bytes queued before the upgrade completed; sent as the first frame.
    early: BytesMut,
}

impl WsClient {
    /// A session whose upgrade request (GET `path`, subprotocol `mqtt`, a random key) is sent
    /// with the first [`Self::send`].
    pub(crate) fn new(host: SocketAddr, path: &str) -> Result<Self, ClientError> {
        let mut request = format!("ws://{host}{path}")
            .into_client_request()
            .map_err(ClientError::WsRequest)?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let config = WebSocketConfig::default()
            .read_buffer_size(4096)
            .write_buffer_size(0);
        let session = Session::start(|stream| {
            ClientHandshake::start(stream, request, Some(config)).map_err(ClientError::WsRequest)
        })?;
        Ok(Self {
            session,
            early: BytesMut::new(),
        })
    }

    /// Moves the upgrade on and reads what frames arrived.
    fn advance(
        &mut self,
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        match std::mem::replace(&mut self.session.state, State::Done) {
            State::Upgrading(handshake) => match handshake.handshake() {
                Ok((socket, _response)) => {
                    // Whatever the handshake wrote goes before the first frame.
                    reply.extend_from_slice(&self.session.take_output());
                    let early = self.early.split().freeze();
                    format_binary(std::slice::from_ref(&early), reply)?;
                    self.session.read_frames(Box::new(socket), plain)
                }
                Err(HandshakeError::Interrupted(handshake)) => {
                    self.session.state = State::Upgrading(Box::new(handshake));
                    Ok(LayerState::Open)
                }
                Err(HandshakeError::Failure(error)) => Err(LayerError::new(format!(
                    "WebSocket upgrade failed: {error}"
                ))),
            },
            State::Open(socket) => self.session.read_frames(socket, plain),
            State::Done => Ok(LayerState::PeerClosed),
        }
    }
}

impl WsHalf for WsClient {
    /// Feeds received bytes: MQTT bytes to `plain`; pongs, close replies and the MQTT bytes
    /// held back during the upgrade to `reply`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        self.session.feed(input);
        let result = self.advance(plain, reply);
        reply.extend_from_slice(&self.session.take_output());
        result
    }

    /// A turn's MQTT bytes as one masked binary frame; before the upgrade completes they are
    /// held back and the upgrade request goes out instead.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match self.session.state {
            State::Open(_) => format_binary(plain, wire),
            State::Upgrading(_) => {
                for frame in plain {
                    self.early.extend_from_slice(frame);
                }
                // No input arrived since the last receive: this writes the request (first
                // call) or finds nothing to read.
                let mut nothing = BytesMut::new();
                let result = self.advance(&mut nothing, wire);
                wire.extend_from_slice(&self.session.take_output());
                result.map(drop)
            }
            State::Done if plain.iter().all(Bytes::is_empty) => Ok(()),
            State::Done => Err(LayerError::new(
                "MQTT bytes queued after the WebSocket closed",
            )),
        }
    }

    fn close(&mut self, wire: &mut BytesMut) {
        self.session.close(wire);
    }
}

/// Formats `plain` as one masked binary frame (nothing when there are no bytes).
pub(crate) fn format_binary(plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
    if plain.iter().all(Bytes::is_empty) {
        return Ok(());
    }
    binary_frame(plain, Some(rand::random()), wire)
}
