//! The client transports against in-memory servers: a rustls `ServerConnection` and a
//! hand-driven WebSocket peer.

use std::io::{Cursor, Read, Write};
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use ring_runtime::{LayerOutput, LayerState, StreamLayer};
use rustls::{ServerConfig, ServerConnection};
use rustls_pki_types::PrivateKeyDer;

use super::*;
use crate::ws::{apply_mask, format_binary};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};

const HOST: &str = "127.0.0.1:1883";

fn host() -> SocketAddr {
    HOST.parse().expect("address")
}

/// A CA (written to `dir`) and a server config with a certificate for 127.0.0.1 it signed.
fn pki(dir: &Path) -> (PathBuf, Arc<ServerConfig>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA");
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

fn args(ca: Option<&Path>, ws: Option<&str>) -> ClientSettings {
    ClientSettings {
        tls_ca: ca.map(Path::to_path_buf),
        tls_server_name: None,
        ws: ws.map(str::to_owned),
    }
}

fn layer(args: &ClientSettings) -> ClientLayer {
    let connector = Connector::new(args)
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
    assert!(Connector::new(&args(None, None)).expect("ok").is_none());
}

#[test]
fn a_ca_file_without_certificates_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("empty.pem");
    std::fs::write(&path, "not a certificate\n").expect("write");
    let error = Connector::new(&args(Some(&path), None)).err();
    assert!(
        matches!(error, Some(ClientError::CaFile { .. })),
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
