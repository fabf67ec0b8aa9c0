//! Client-side transports as ring-runtime stream layers: TLS (a rustls `ClientConnection`,
//! ring provider), MQTT over WebSocket (tungstenite's client handshake over an in-memory pipe,
//! one masked binary frame per turn) and both together (secure WebSocket: TLS outermost).
//!
//! A plain TCP run builds no [`Connector`] and sets no layer.

use std::cell::RefCell;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ring_runtime::{LayerError, LayerOutput, LayerState, StreamLayer};
use rustls::client::Resumption;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::http::HeaderValue;
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use tungstenite::protocol::{Message, WebSocket, WebSocketConfig};

use crate::cli::TransportArgs;

/// The WebSocket subprotocol offered in the upgrade request.
const SUBPROTOCOL: &str = "mqtt";

/// Why a transport could not be set up.
#[derive(Debug)]
pub enum TransportError {
    /// The CA file could not be read or holds no usable certificate.
    CaFile { path: PathBuf, cause: String },
    /// `--tls-server-name` is not a DNS name or IP address.
    ServerName { name: String, cause: String },
    /// rustls refused the configuration or a new session.
    Tls(rustls::Error),
    /// The WebSocket upgrade request could not be built.
    WsRequest(tungstenite::Error),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::CaFile { path, cause } => {
                write!(f, "TLS CA file {}: {cause}", path.display())
            }
            Self::ServerName { name, cause } => write!(f, "TLS server name {name:?}: {cause}"),
            Self::Tls(error) => write!(f, "TLS: {error}"),
            Self::WsRequest(error) => write!(f, "WebSocket upgrade request: {error}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// What every connection of a run uses to build its layer.
pub struct Connector {
    tls: Option<TlsSettings>,
    ws_path: Option<Arc<str>>,
}

struct TlsSettings {
    config: Arc<ClientConfig>,
    /// `None`: the host's IP address.
    server_name: Option<ServerName<'static>>,
}

impl Connector {
    /// The connector the flags ask for; `None` for plain TCP.
    pub fn from_args(args: &TransportArgs) -> Result<Option<Arc<Self>>, TransportError> {
        if args.tls_ca.is_none() && args.ws.is_none() {
            return Ok(None);
        }
        let tls = match &args.tls_ca {
            None => None,
            Some(ca) => Some(TlsSettings {
                config: client_config(ca)?,
                server_name: args
                    .tls_server_name
                    .as_deref()
                    .map(server_name)
                    .transpose()?,
            }),
        };
        let ws_path = args.ws.as_deref().map(ws_path);
        Ok(Some(Arc::new(Self { tls, ws_path })))
    }

    /// A fresh layer for a connection to `host`.
    pub fn layer(&self, host: SocketAddr) -> Result<ClientLayer, TransportError> {
        let tls = match &self.tls {
            None => None,
            Some(settings) => {
                let name = settings
                    .server_name
                    .clone()
                    .unwrap_or_else(|| ServerName::IpAddress(host.ip().into()));
                let mut tls = ClientConnection::new(Arc::clone(&settings.config), name)
                    .map_err(TransportError::Tls)?;
                // The plaintext queued before the handshake ends (CONNECT) waits in rustls.
                tls.set_buffer_limit(None);
                Some(Box::new(tls))
            }
        };
        let ws = match &self.ws_path {
            None => None,
            Some(path) => Some(Box::new(WsClient::new(host, path)?)),
        };
        Ok(ClientLayer { tls, ws })
    }
}

/// `PATH` with a leading slash.
fn ws_path(path: &str) -> Arc<str> {
    if path.starts_with('/') {
        Arc::from(path)
    } else {
        Arc::from(format!("/{path}"))
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, TransportError> {
    ServerName::try_from(name.to_owned()).map_err(|e| TransportError::ServerName {
        name: name.to_owned(),
        cause: e.to_string(),
    })
}

/// A client config trusting the certificates in `ca`. Session resumption is off: every
/// connection makes a full handshake, as a fleet of distinct devices would.
fn client_config(ca: &Path) -> Result<Arc<ClientConfig>, TransportError> {
    let ca_error = |cause: String| TransportError::CaFile {
        path: ca.to_owned(),
        cause,
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| ca_error(e.to_string()))? {
        let cert = cert.map_err(|e| ca_error(e.to_string()))?;
        roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ca_error("no certificate in the file".to_owned()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TransportError::Tls)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = Resumption::disabled();
    Ok(Arc::new(config))
}

/// One connection's client transport: TLS outermost, WebSocket framing on its plaintext.
pub struct ClientLayer {
    tls: Option<Box<ClientConnection>>,
    ws: Option<Box<WsClient>>,
}

impl StreamLayer for ClientLayer {
    fn receive(&mut self, input: Bytes, out: &mut LayerOutput) -> Result<LayerState, LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (Some(tls), None) => tls_receive(tls, &input, &mut out.plain, &mut out.wire),
            (None, Some(ws)) => ws.receive(&input, &mut out.plain, &mut out.wire),
            (Some(tls), Some(ws)) => {
                let mut decrypted = BytesMut::new();
                let tls_state = tls_receive(tls, &input, &mut decrypted, &mut out.wire)?;
                let mut reply = BytesMut::new();
                let ws_state = ws.receive(&decrypted, &mut out.plain, &mut reply);
                if !reply.is_empty() {
                    tls_send(tls, &[reply.freeze()], &mut out.wire)?;
                }
                match ws_state? {
                    LayerState::Open => Ok(tls_state),
                    closed => Ok(closed),
                }
            }
            (None, None) => {
                out.plain.extend_from_slice(&input);
                Ok(LayerState::Open)
            }
        }
    }

    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match (self.tls.as_deref_mut(), self.ws.as_deref_mut()) {
            (Some(tls), None) => tls_send(tls, plain, wire),
            (None, Some(ws)) => ws.send(plain, wire),
            (Some(tls), Some(ws)) => {
                let mut framed = BytesMut::new();
                ws.send(plain, &mut framed)?;
                let framed = framed.freeze();
                tls_send(tls, std::slice::from_ref(&framed), wire)
            }
            (None, None) => {
                for frame in plain {
                    wire.extend_from_slice(frame);
                }
                Ok(())
            }
        }
    }

    fn close(&mut self, wire: &mut BytesMut) {
        let mut goodbye = BytesMut::new();
        if let Some(ws) = self.ws.as_deref_mut() {
            ws.close(&mut goodbye);
        }
        match self.tls.as_deref_mut() {
            None => wire.extend_from_slice(&goodbye),
            Some(tls) => {
                let _ = tls_send(tls, &[goodbye.freeze()], wire);
                tls.send_close_notify();
                let _ = drain_tls(tls, wire);
            }
        }
    }
}

fn tls_error(error: impl fmt::Display) -> LayerError {
    LayerError::new(format!("TLS: {error}"))
}

/// Decrypts `input`: plaintext to `plain`, handshake messages and alerts to `wire`.
fn tls_receive(
    tls: &mut ClientConnection,
    input: &[u8],
    plain: &mut BytesMut,
    wire: &mut BytesMut,
) -> Result<LayerState, LayerError> {
    let mut rest = input;
    let mut state = LayerState::Open;
    while !rest.is_empty() {
        if tls.read_tls(&mut rest).map_err(tls_error)? == 0 {
            return Err(LayerError::new("TLS: record buffer full"));
        }
        let io = match tls.process_new_packets() {
            Ok(io) => io,
            Err(error) => {
                // The alert that tells the server why.
                let _ = drain_tls(tls, wire);
                return Err(tls_error(error));
            }
        };
        let len = io.plaintext_bytes_to_read();
        if len > 0 {
            let start = plain.len();
            plain.resize(start + len, 0);
            tls.reader()
                .read_exact(&mut plain[start..])
                .map_err(tls_error)?;
        }
        if io.peer_has_closed() {
            state = LayerState::PeerClosed;
        }
    }
    // Handshake messages, and the plaintext rustls held until the handshake ended.
    drain_tls(tls, wire)?;
    Ok(state)
}

/// Encrypts `plain` (frames joined first: one record for many) into `wire`; before the
/// handshake ends rustls keeps the plaintext and `wire` gets the handshake messages.
fn tls_send(
    tls: &mut ClientConnection,
    plain: &[Bytes],
    wire: &mut BytesMut,
) -> Result<(), LayerError> {
    if plain.len() > 1 {
        let mut joined = BytesMut::with_capacity(plain.iter().map(Bytes::len).sum());
        for frame in plain {
            joined.put_slice(frame);
        }
        tls.writer().write_all(&joined).map_err(tls_error)?;
    } else if let Some(frame) = plain.first() {
        tls.writer().write_all(frame).map_err(tls_error)?;
    }
    drain_tls(tls, wire)
}

/// Moves every TLS record rustls has ready into `wire`.
fn drain_tls(tls: &mut ClientConnection, wire: &mut BytesMut) -> Result<(), LayerError> {
    let mut writer = wire.writer();
    while tls.wants_write() {
        tls.write_tls(&mut writer).map_err(tls_error)?;
    }
    Ok(())
}

/// Bytes between the layer and tungstenite.
#[derive(Default)]
struct Pipe {
    input: BytesMut,
    output: BytesMut,
}

/// tungstenite's view of the pipe: reads what arrived (`WouldBlock` when nothing has), writes
/// into the output.
struct PipeStream(Rc<RefCell<Pipe>>);

impl Read for PipeStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut pipe = self.0.borrow_mut();
        if pipe.input.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let len = buf.len().min(pipe.input.len());
        buf[..len].copy_from_slice(&pipe.input[..len]);
        pipe.input.advance(len);
        Ok(len)
    }
}

impl Write for PipeStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

type Handshake = MidHandshake<ClientHandshake<PipeStream>>;

enum WsState {
    /// Upgrade request written (or about to be), waiting for `101`.
    Upgrading(Box<Handshake>),
    Open(Box<WebSocket<PipeStream>>),
    /// Failed or closed.
    Done,
}

/// One connection's WebSocket client side.
struct WsClient {
    pipe: Rc<RefCell<Pipe>>,
    state: WsState,
    /// MQTT bytes queued before the upgrade completed; sent as the first frame.
    early: BytesMut,
}

impl WsClient {
    /// A session whose upgrade request (GET `path`, subprotocol `mqtt`, a random key) is sent
    /// with the first [`Self::send`].
    fn new(host: SocketAddr, path: &str) -> Result<Self, TransportError> {
        let mut request = format!("ws://{host}{path}")
            .into_client_request()
            .map_err(TransportError::WsRequest)?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(SUBPROTOCOL),
        );
        let config = WebSocketConfig::default()
            .read_buffer_size(4096)
            .write_buffer_size(0);
        let pipe = Rc::new(RefCell::new(Pipe::default()));
        let stream = PipeStream(Rc::clone(&pipe));
        let handshake = ClientHandshake::start(stream, request, Some(config))
            .map_err(TransportError::WsRequest)?;
        Ok(Self {
            pipe,
            state: WsState::Upgrading(Box::new(handshake)),
            early: BytesMut::new(),
        })
    }

    /// Feeds received bytes: MQTT bytes to `plain`; pongs, close replies and the MQTT bytes
    /// held back during the upgrade to `reply`.
    fn receive(
        &mut self,
        input: &[u8],
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        self.pipe.borrow_mut().input.extend_from_slice(input);
        let result = self.advance(plain, reply);
        reply.extend_from_slice(&self.pipe.borrow_mut().output.split());
        result
    }

    /// Moves the upgrade on and reads what frames arrived.
    fn advance(
        &mut self,
        plain: &mut BytesMut,
        reply: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        match std::mem::replace(&mut self.state, WsState::Done) {
            WsState::Upgrading(handshake) => match handshake.handshake() {
                Ok((socket, _response)) => {
                    // Whatever the handshake wrote goes before the first frame.
                    reply.extend_from_slice(&self.pipe.borrow_mut().output.split());
                    let early = self.early.split().freeze();
                    format_binary(std::slice::from_ref(&early), reply)?;
                    self.read_frames(Box::new(socket), plain)
                }
                Err(HandshakeError::Interrupted(handshake)) => {
                    self.state = WsState::Upgrading(Box::new(handshake));
                    Ok(LayerState::Open)
                }
                Err(HandshakeError::Failure(error)) => Err(LayerError::new(format!(
                    "WebSocket upgrade failed: {error}"
                ))),
            },
            WsState::Open(socket) => self.read_frames(socket, plain),
            WsState::Done => Ok(LayerState::PeerClosed),
        }
    }

    /// Reads every complete frame in the pipe: binary payloads are MQTT bytes.
    fn read_frames(
        &mut self,
        mut socket: Box<WebSocket<PipeStream>>,
        plain: &mut BytesMut,
    ) -> Result<LayerState, LayerError> {
        loop {
            match socket.read() {
                Ok(Message::Binary(data)) => plain.extend_from_slice(&data),
                Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) => {}
                Ok(Message::Text(_)) => {
                    return Err(LayerError::new(
                        "WebSocket text frame (MQTT travels in binary frames)",
                    ));
                }
                Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => {
                    // The close reply tungstenite queued goes to the pipe.
                    let _ = socket.flush();
                    return Ok(LayerState::PeerClosed);
                }
                Err(tungstenite::Error::Io(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    // Pongs for pings leave now.
                    let _ = socket.flush();
                    self.state = WsState::Open(socket);
                    return Ok(LayerState::Open);
                }
                Err(error) => return Err(LayerError::new(format!("WebSocket: {error}"))),
            }
        }
    }

    /// A turn's MQTT bytes as one masked binary frame; before the upgrade completes they are
    /// held back and the upgrade request goes out instead.
    fn send(&mut self, plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
        match self.state {
            WsState::Open(_) => format_binary(plain, wire),
            WsState::Upgrading(_) => {
                for frame in plain {
                    self.early.extend_from_slice(frame);
                }
                // No input arrived since the last receive: this writes the request (first
                // call) or finds nothing to read.
                let mut nothing = BytesMut::new();
                let result = self.advance(&mut nothing, wire);
                wire.extend_from_slice(&self.pipe.borrow_mut().output.split());
                result.map(drop)
            }
            WsState::Done if plain.iter().all(Bytes::is_empty) => Ok(()),
            WsState::Done => Err(LayerError::new(
                "MQTT bytes queued after the WebSocket closed",
            )),
        }
    }

    /// A close frame, when the session is open.
    fn close(&mut self, wire: &mut BytesMut) {
        if let WsState::Open(socket) = &mut self.state {
            let _ = socket.close(None);
            let _ = socket.flush();
            wire.extend_from_slice(&self.pipe.borrow_mut().output.split());
        }
        self.state = WsState::Done;
    }
}

/// Formats `plain` as one masked binary frame (nothing when there are no bytes).
fn format_binary(plain: &[Bytes], wire: &mut BytesMut) -> Result<(), LayerError> {
    let len: usize = plain.iter().map(Bytes::len).sum();
    if len == 0 {
        return Ok(());
    }
    let mask: [u8; 4] = rand::random();
    let header = FrameHeader {
        opcode: OpCode::Data(Data::Binary),
        mask: Some(mask),
        ..FrameHeader::default()
    };
    header
        .format(len as u64, &mut wire.writer())
        .map_err(|e| LayerError::new(format!("WebSocket frame header: {e}")))?;
    let start = wire.len();
    wire.reserve(len);
    for frame in plain {
        wire.put_slice(frame);
    }
    apply_mask(&mut wire[start..], mask);
    Ok(())
}

/// XORs `payload` with the frame mask (RFC 6455 section 5.3).
fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    for (byte, key) in payload.iter_mut().zip(mask.iter().cycle()) {
        *byte ^= key;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use rustls::{ServerConfig, ServerConnection};
    use rustls_pki_types::PrivateKeyDer;

    use super::*;

    const HOST: &str = "127.0.0.1:1883";

    fn host() -> SocketAddr {
        HOST.parse().expect("address")
    }

    /// A CA (written to `dir`) and a server config with a certificate for 127.0.0.1 it signed.
    fn pki(dir: &Path) -> (PathBuf, Arc<ServerConfig>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
        let ca_path = dir.join("ca.pem");
        std::fs::write(&ca_path, ca.pem()).expect("write CA");
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("params")
            .signed_by(&key, &ca)
            .expect("server certificate");
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .expect("server config");
        (ca_path, Arc::new(config))
    }

    fn args(ca: Option<&Path>, ws: Option<&str>) -> TransportArgs {
        TransportArgs {
            tls_ca: ca.map(Path::to_path_buf),
            tls_server_name: None,
            ws: ws.map(str::to_owned),
        }
    }

    fn layer(args: &TransportArgs) -> ClientLayer {
        let connector = Connector::from_args(args)
            .expect("connector")
            .expect("a transport");
        connector.layer(host()).expect("layer")
    }

    /// Runs the client's turn: what it queued, encoded for the socket.
    fn client_send(client: &mut ClientLayer, plain: &[&[u8]]) -> Vec<u8> {
        let frames: Vec<Bytes> = plain.iter().map(|p| Bytes::copy_from_slice(p)).collect();
        let mut wire = BytesMut::new();
        client.send(&frames, &mut wire).expect("send");
        wire.to_vec()
    }

    /// Feeds the client bytes from the server: (plain for the handler, bytes back).
    fn client_receive(client: &mut ClientLayer, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut out = LayerOutput::default();
        let state = client
            .receive(Bytes::copy_from_slice(input), &mut out)
            .expect("receive");
        assert_eq!(state, LayerState::Open);
        (out.plain.to_vec(), out.wire.to_vec())
    }

    /// Server side: takes TLS bytes, returns (plaintext, TLS bytes back).
    fn server_pump(server: &mut ServerConnection, input: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut rest = input;
        while !rest.is_empty() {
            server.read_tls(&mut rest).expect("read_tls");
            server.process_new_packets().expect("server TLS");
        }
        let mut plain = Vec::new();
        let _ = server.reader().read_to_end(&mut plain);
        let mut wire = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut wire).expect("write_tls");
        }
        (plain, wire)
    }

    fn server_write(server: &mut ServerConnection, plain: &[u8]) -> Vec<u8> {
        server.writer().write_all(plain).expect("write");
        let mut wire = Vec::new();
        while server.wants_write() {
            server.write_tls(&mut wire).expect("write_tls");
        }
        wire
    }

    /// The `101` answer to the upgrade request in `request`.
    fn switching_protocols(request: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(request).expect("HTTP request");
        assert!(text.starts_with("GET /mqtt HTTP/1.1\r\n"), "{text}");
        assert!(text.contains("Sec-WebSocket-Protocol: mqtt\r\n"), "{text}");
        let key = text
            .lines()
            .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
            .expect("a key");
        let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
        format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
        )
        .into_bytes()
    }

    /// An unmasked binary frame, as a server sends it.
    fn server_frame(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let frame = tungstenite::protocol::frame::Frame::message(
            Bytes::copy_from_slice(payload),
            OpCode::Data(Data::Binary),
            true,
        );
        frame.format(&mut out).expect("frame");
        out
    }

    /// Parses one client frame: it must be masked and binary; returns the unmasked payload.
    fn parse_client_frame(wire: &[u8]) -> Vec<u8> {
        let mut cursor = Cursor::new(wire);
        let (header, len) = FrameHeader::parse(&mut cursor)
            .expect("header")
            .expect("a whole header");
        assert_eq!(header.opcode, OpCode::Data(Data::Binary));
        let mask = header.mask.expect("clients mask their frames");
        let start = cursor.position() as usize;
        assert_eq!(wire.len() - start, len as usize, "one frame");
        let mut payload = wire[start..].to_vec();
        apply_mask(&mut payload, mask);
        payload
    }

    #[test]
    fn plain_tcp_builds_no_connector() {
        assert!(
            Connector::from_args(&args(None, None))
                .expect("ok")
                .is_none()
        );
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").expect("write");
        let error = Connector::from_args(&args(Some(&path), None)).err();
        assert!(
            matches!(error, Some(TransportError::CaFile { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn masked_frames_round_trip() {
        let mut wire = BytesMut::new();
        let parts = [Bytes::from_static(b"\x30\x05"), Bytes::from(vec![7u8; 300])];
        format_binary(&parts, &mut wire).expect("frame");
        let mut expected = b"\x30\x05".to_vec();
        expected.extend_from_slice(&[7u8; 300]);
        assert_eq!(parse_client_frame(&wire), expected);
        let mut empty = BytesMut::new();
        format_binary(&[], &mut empty).expect("nothing");
        assert!(empty.is_empty());
    }

    #[test]
    fn tls_handshake_then_mqtt_bytes_both_ways() {
        let dir = tempfile::tempdir().expect("dir");
        let (ca, server_config) = pki(dir.path());
        let mut client = layer(&args(Some(&ca), None));
        let mut server = ServerConnection::new(server_config).expect("server");
        // CONNECT is queued before the handshake: the client sends its hello and holds it.
        let mut to_server = client_send(&mut client, &[b"CONNECT"]);
        let mut received = Vec::new();
        for _ in 0..4 {
            let (plain, to_client) = server_pump(&mut server, &to_server);
            received.extend_from_slice(&plain);
            if to_client.is_empty() {
                break;
            }
            let (plain, back) = client_receive(&mut client, &to_client);
            assert!(plain.is_empty());
            to_server = back;
        }
        assert_eq!(received, b"CONNECT");
        let (plain, _) = client_receive(&mut client, &server_write(&mut server, b"CONNACK"));
        assert_eq!(plain, b"CONNACK");
        let (plain, _) = server_pump(&mut server, &client_send(&mut client, &[b"PUB", b"LISH"]));
        assert_eq!(plain, b"PUBLISH");
    }

    #[test]
    fn tls_refuses_a_certificate_for_another_name() {
        let dir = tempfile::tempdir().expect("dir");
        let (ca, server_config) = pki(dir.path());
        let mut transport = args(Some(&ca), None);
        transport.tls_server_name = Some("broker.example".to_owned());
        let mut client = layer(&transport);
        let mut server = ServerConnection::new(server_config).expect("server");
        let (_, to_client) = server_pump(&mut server, &client_send(&mut client, &[]));
        let mut out = LayerOutput::default();
        let result = client.receive(Bytes::from(to_client), &mut out);
        assert!(result.is_err(), "the handshake must fail");
    }

    #[test]
    fn websocket_upgrade_then_frames() {
        let mut client = layer(&args(None, Some("mqtt")));
        let request = client_send(&mut client, &[b"CONNECT"]);
        // Nothing but the request until the upgrade is answered.
        assert!(request.ends_with(b"\r\n\r\n"));
        assert!(client_send(&mut client, &[]).is_empty());
        let mut answer = switching_protocols(&request);
        answer.extend_from_slice(&server_frame(b"CONNACK"));
        let (plain, early) = client_receive(&mut client, &answer);
        assert_eq!(plain, b"CONNACK");
        assert_eq!(parse_client_frame(&early), b"CONNECT");
        let wire = client_send(&mut client, &[b"PUB", b"LISH"]);
        assert_eq!(parse_client_frame(&wire), b"PUBLISH");
    }

    #[test]
    fn websocket_refused_upgrade_is_an_error() {
        let mut client = layer(&args(None, Some("/mqtt")));
        client_send(&mut client, &[]);
        let mut out = LayerOutput::default();
        let refusal = Bytes::from_static(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        assert!(client.receive(refusal, &mut out).is_err());
    }
}
