//! WebSocket and secure WebSocket listeners: rumqttc over ws:// and wss://, a tungstenite
//! client speaking raw MQTT frames, and refused upgrades (garbage, wrong path, no `mqtt`
//! subprotocol, text frames). Python paho-mqtt over ws/wss runs in the interop step.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use codec::{Packet, QoS};
use tungstenite::Message;
use tungstenite::client::IntoClientRequest;

use crate::client::{RawClient, V5, connect_packet};
use crate::harness::TestBroker;
use crate::pki::TestPki;

const WS: &str = "[[listeners.ws]]\nbind = \"127.0.0.1:0\"\npath = \"/mqtt\"\n";

fn wss_listener(pki: &TestPki) -> String {
    format!(
        "[[listeners.wss]]\nbind = \"127.0.0.1:0\"\npath = \"/mqtt\"\n{}",
        pki.listener_keys()
    )
}

/// A rumqttc client over `transport`, driven until it received one PUBLISH on `topic` that it
/// published itself.
fn rumqttc_round_trip(url: &str, port: u16, transport: rumqttc::Transport, topic: &str) {
    let mut options = rumqttc::MqttOptions::new(format!("rumqttc-{topic}"), url, port);
    options.set_keep_alive(Duration::from_secs(30));
    options.set_transport(transport);
    let (client, mut connection) = rumqttc::Client::new(options, 16);
    client.subscribe(topic, rumqttc::QoS::AtLeastOnce).unwrap();
    client
        .publish(topic, rumqttc::QoS::AtLeastOnce, false, b"framed".to_vec())
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match connection.recv_timeout(left) {
            Ok(Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(publish)))) => {
                assert_eq!(&publish.payload[..], b"framed");
                return;
            }
            Ok(Ok(_)) => {}
            other => panic!("rumqttc over {url}: {other:?}"),
        }
    }
}

#[test]
fn rumqttc_round_trips_over_websocket() {
    let broker = TestBroker::with_config(WS);
    let port = broker.addr_of("ws").port();
    let url = format!("ws://127.0.0.1:{port}/mqtt");
    rumqttc_round_trip(&url, port, rumqttc::Transport::Ws, "ws/rumqttc");
}

#[test]
fn rumqttc_round_trips_over_secure_websocket() {
    let pki = TestPki::new();
    let broker = TestBroker::with_config(&wss_listener(&pki));
    let port = broker.addr_of("wss").port();
    let url = format!("wss://127.0.0.1:{port}/mqtt");
    let ca = std::fs::read(&pki.ca.cert).unwrap();
    let tls = rumqttc::TlsConfiguration::Simple {
        ca,
        alpn: None,
        client_auth: None,
    };
    rumqttc_round_trip(
        &url,
        port,
        rumqttc::Transport::wss_with_config(tls),
        "wss/rumqttc",
    );
}

/// A blocking tungstenite client at `path` offering `protocol`.
fn ws_client(
    addr: SocketAddr,
    path: &str,
    protocol: Option<&str>,
) -> Result<tungstenite::WebSocket<TcpStream>, String> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
    if let Some(protocol) = protocol {
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", protocol.parse().unwrap());
    }
    tungstenite::client(request, stream)
        .map(|(socket, _)| socket)
        .map_err(|e| e.to_string())
}

fn frame(packet: &Packet) -> Vec<u8> {
    let mut bytes = bytes::BytesMut::new();
    codec::encode(packet, V5, &mut bytes).unwrap();
    bytes.to_vec()
}

#[test]
fn mqtt_packets_split_and_joined_across_websocket_messages() {
    let broker = TestBroker::with_config(WS);
    let ws = broker.addr_of("ws");
    let mut socket = ws_client(ws, "/mqtt", Some("mqtt")).expect("upgrade accepted");
    let connect = frame(&Packet::Connect(Box::new(connect_packet(
        V5, "raw-ws", true,
    ))));
    // The CONNECT in two messages.
    let (head, tail) = connect.split_at(5);
    socket.send(Message::binary(head.to_vec())).unwrap();
    socket.send(Message::binary(tail.to_vec())).unwrap();
    let Message::Binary(connack) = socket.read().unwrap() else {
        panic!("CONNACK in a binary message");
    };
    assert_eq!(connack[0] >> 4, 2, "CONNACK");
    // A ping is answered with a pong (tungstenite on the broker side).
    socket.send(Message::Ping(b"hi".to_vec().into())).unwrap();
    // A subscriber on plain TCP sees what the WebSocket client publishes, two PUBLISHes in one
    // message.
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "plain");
    plain.subscribe("ws/t", QoS::AtMostOnce);
    let mut two = frame(&Packet::Publish(crate::client::publish_packet(
        "ws/t",
        b"one",
        QoS::AtMostOnce,
        None,
    )));
    two.extend(frame(&Packet::Publish(crate::client::publish_packet(
        "ws/t",
        b"two",
        QoS::AtMostOnce,
        None,
    ))));
    socket.send(Message::binary(two)).unwrap();
    assert_eq!(plain.expect_publish_on("ws/t").payload(), b"one");
    assert_eq!(plain.expect_publish_on("ws/t").payload(), b"two");
    let pong = socket.read().unwrap();
    assert!(matches!(pong, Message::Pong(_)), "{pong:?}");
    socket.close(None).unwrap();
}

/// Sends `bytes` and returns what came back before the broker closed.
fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn bad_upgrades_are_refused_and_others_go_on() {
    let broker = TestBroker::with_config(WS);
    let ws = broker.addr_of("ws");
    let no_protocol = ws_client(ws, "/mqtt", None).unwrap_err();
    assert!(no_protocol.contains("400"), "{no_protocol}");
    let wrong_protocol = ws_client(ws, "/mqtt", Some("chat")).unwrap_err();
    assert!(wrong_protocol.contains("400"), "{wrong_protocol}");
    let wrong_path = ws_client(ws, "/other", Some("mqtt")).unwrap_err();
    assert!(wrong_path.contains("404"), "{wrong_path}");
    // Garbage before the upgrade, and plain MQTT on the WebSocket port.
    let garbage = exchange(ws, b"\x00\x01garbage\r\n\r\n");
    assert!(!garbage.contains("101"), "{garbage}");
    let plain = exchange(
        ws,
        &frame(&Packet::Connect(Box::new(connect_packet(V5, "p", true)))),
    );
    assert!(!plain.contains("101"), "{plain}");
    // A text message is not MQTT: the connection ends.
    let mut socket = ws_client(ws, "/mqtt", Some("mqtt")).unwrap();
    socket.send(Message::text("CONNECT")).unwrap();
    let ended = loop {
        match socket.read() {
            Ok(Message::Close(_)) | Err(_) => break true,
            Ok(_) => {}
        }
    };
    assert!(ended);
    broker.assert_serving();
    let mut good = ws_client(ws, "/mqtt", Some("mqttv3.1, mqtt")).expect("still upgrading");
    good.send(Message::binary(frame(&Packet::Connect(Box::new(
        connect_packet(V5, "g", true),
    )))))
    .unwrap();
    assert!(matches!(good.read().unwrap(), Message::Binary(_)));
}

/// The upgrade request of a browser page at `origin` (none: a device client).
fn upgrade_request(origin: Option<&str>) -> String {
    let origin = origin.map_or(String::new(), |o| format!("Origin: {o}\r\n"));
    format!(
        "GET /mqtt HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Protocol: mqtt\r\n{origin}\r\n"
    )
}

/// The first line of the answer to `request`, read until the head ends.
fn status_line(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn a_listener_with_allowed_origins_refuses_pages_of_other_origins() {
    let broker = TestBroker::with_config(&format!(
        "{WS}allowed_origins = [\"https://dashboard.example\"]\n"
    ));
    let ws = broker.addr_of("ws");
    let evil = status_line(ws, &upgrade_request(Some("http://evil.example")));
    assert!(evil.starts_with("HTTP/1.1 403"), "{evil}");
    let listed = status_line(ws, &upgrade_request(Some("https://Dashboard.example")));
    assert!(listed.starts_with("HTTP/1.1 101"), "{listed}");
    let device = status_line(ws, &upgrade_request(None));
    assert!(device.starts_with("HTTP/1.1 101"), "{device}");
    // Without the key any origin is accepted, as before.
    let open = TestBroker::with_config(WS);
    let any = status_line(
        open.addr_of("ws"),
        &upgrade_request(Some("http://evil.example")),
    );
    assert!(any.starts_with("HTTP/1.1 101"), "{any}");
}
