//! A QUIC client for the tests: quinn-proto's client endpoint driven over a real UDP socket,
//! with one bidirectional stream (the MQTT stream), and the certificate it trusts. Shared by
//! the transport crate's tests and the broker's (`tests/broker/quic.rs`), each using part.
#![allow(dead_code, reason = "each test crate uses part of the client")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig,
    Event, StreamId, VarInt,
};
use rcgen::{CertificateParams, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The longest any wait here lasts: a bound against hangs, never a measured time.
const HANG: Duration = Duration::from_secs(20);

/// Polls `done` until it holds; fails after [`HANG`].
pub fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + HANG;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {HANG:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A self-signed certificate for `localhost` and its key, in PEM files (the client trusts
/// that certificate).
pub struct Pki {
    _dir: tempfile::TempDir,
    pub cert: PathBuf,
    pub key: PathBuf,
    der: CertificateDer<'static>,
}

impl Pki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        Self {
            _dir: dir,
            cert: cert_path,
            key: key_path,
            der: cert.der().clone(),
        }
    }

    /// A QUIC listener's config serving this certificate (no client certificates, the
    /// default bounds).
    pub fn listener_config(&self) -> transport::quic::QuicListenerConfig {
        let tls = transport::TlsSettings {
            cert: self.cert.clone(),
            key: self.key.clone(),
            client_ca: None,
            require_client_cert: false,
            identity_as_username: false,
            crl: None,
            ocsp_response: None,
        };
        let settings = transport::quic::QuicSettings::new(tls);
        transport::quic::QuicListenerConfig::load(&settings, Arc::default()).unwrap()
    }

    fn client_config(&self) -> ClientConfig {
        quic_client_config(self.roots(), None, false)
    }

    /// A client config that keeps the server's resumption tickets and sends 0-RTT data with
    /// one: the connections made with it (or its clones) after the first may resume.
    pub fn resuming_config(&self) -> ClientConfig {
        quic_client_config(self.roots(), None, true)
    }

    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        roots
    }
}

/// A QUIC client config (TLS 1.3, ALPN `mqtt`) trusting the CA certificates in the PEM file
/// `ca`, with the client certificate and key of PEM files `client` when given.
pub fn client_config_from_files(ca: &Path, client: Option<(&Path, &Path)>) -> ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let client = client.map(|(cert, key)| {
        let certs = CertificateDer::pem_file_iter(cert)
            .unwrap()
            .map(Result::unwrap);
        (certs.collect(), PrivateKeyDer::from_pem_file(key).unwrap())
    });
    quic_client_config(roots, client, false)
}

type ClientCert = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn quic_client_config(
    roots: rustls::RootCertStore,
    client: Option<ClientCert>,
    early_data: bool,
) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots);
    let mut tls = match client {
        Some((certs, key)) => builder.with_client_auth_cert(certs, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![transport::quic::ALPN.to_vec()];
    tls.enable_early_data = early_data;
    ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

/// One QUIC connection to the server and its MQTT stream.
pub struct QuicClient {
    socket: UdpSocket,
    endpoint: Endpoint,
    handle: ConnectionHandle,
    conn: Connection,
    stream: Option<StreamId>,
    connected: bool,
    lost: bool,
    buf: Vec<u8>,
    /// Copies of the datagrams sent while recording ([`Self::record_first_flight`]).
    recorded: Option<Vec<Vec<u8>>>,
    /// Datagrams are recorded, not sent.
    holding_back: bool,
}

impl QuicClient {
    /// Starts the handshake with `server`, trusting `pki`'s certificate (completed by the
    /// first wait).
    pub fn connect(server: SocketAddr, pki: &Pki) -> Self {
        Self::connect_with(server, "localhost", pki.client_config())
    }

    /// Starts the handshake with `server` named `server_name` with `config`.
    pub fn connect_with(server: SocketAddr, server_name: &str, config: ClientConfig) -> Self {
        let mut endpoint = Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let (handle, conn) = endpoint
            .connect(Instant::now(), config, server, server_name)
            .unwrap();
        Self {
            socket: bound_socket(),
            endpoint,
            handle,
            conn,
            stream: None,
            connected: false,
            lost: false,
            buf: Vec::new(),
            recorded: None,
            holding_back: false,
        }
    }

    /// Opens the MQTT stream before the handshake and writes `data` on it as 0-RTT data;
    /// `false` (nothing written) when the config holds no ticket from this server.
    pub fn send_early(&mut self, data: &[u8]) -> bool {
        if !self.conn.has_0rtt() {
            return false;
        }
        let stream = self
            .conn
            .streams()
            .open(Dir::Bi)
            .expect("a stream in 0-RTT");
        self.stream = Some(stream);
        let written = self.conn.send_stream(stream).write(data).unwrap();
        assert_eq!(
            written,
            data.len(),
            "the early data fits the remembered window"
        );
        true
    }

    /// Whether the server took the 0-RTT data (known once the handshake completed).
    pub fn accepted_0rtt(&self) -> bool {
        self.conn.accepted_0rtt()
    }

    /// The datagrams the client sends first (its Initial and any 0-RTT packets), sent or, with
    /// `send` false, only taken: what an attacker on the path could copy or hold back.
    pub fn first_flight(&mut self, send: bool) -> Vec<Vec<u8>> {
        self.recorded = Some(Vec::new());
        self.holding_back = !send;
        self.transmit(Instant::now());
        self.holding_back = false;
        self.recorded.take().unwrap()
    }

    /// Whether the handshake completes (`false`: the connection was refused or lost first,
    /// say for a certificate the client does not trust).
    pub fn handshake_ok(&mut self) -> bool {
        let deadline = Instant::now() + HANG;
        while !self.connected && !self.lost {
            let now = Instant::now();
            assert!(now < deadline, "the handshake: not within {HANG:?}");
            self.turn(now);
        }
        self.connected
    }

    /// Whether the connection was closed or lost.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// Completes the handshake and opens the MQTT stream.
    pub fn open_stream(&mut self) {
        self.pump("the handshake", |c| c.connected);
        self.stream = Some(self.conn.streams().open(Dir::Bi).expect("a stream"));
    }

    /// Sends `data` on the stream and reads as many bytes back.
    pub fn round_trip(&mut self, data: &[u8]) -> Vec<u8> {
        let stream = self.stream.expect("the stream is open");
        let mut written = 0;
        let mut echoed = Vec::with_capacity(data.len());
        self.pump("the echo", |c| {
            if written < data.len()
                && let Ok(n) = c.conn.send_stream(stream).write(&data[written..])
            {
                written += n;
            }
            c.read_into(stream, &mut echoed);
            echoed.len() >= data.len()
        });
        echoed
    }

    /// Writes `data` on the stream (waiting while flow control holds it back).
    pub fn write_all(&mut self, data: &[u8]) {
        let stream = self.stream.expect("the stream is open");
        let mut written = 0;
        self.pump("the write", |c| {
            if let Ok(n) = c.conn.send_stream(stream).write(&data[written..]) {
                written += n;
            }
            written == data.len()
        });
    }

    /// Reads the stream into `buf` until `done(buf)`.
    pub fn read_until(&mut self, what: &str, buf: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) {
        let stream = self.stream.expect("the stream is open");
        self.pump(what, |c| {
            c.read_into(stream, buf);
            done(buf)
        });
    }

    /// The address the client sends from now.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    /// Sends from a new local port from now on (an address change, as after a NAT rebinding).
    pub fn rebind(&mut self) {
        self.socket = bound_socket();
    }

    /// Drives the connection (what was written is retransmitted through any loss) until
    /// `done`, or until the server closed it.
    pub fn drive_until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + HANG;
        while !self.lost && !done() {
            let now = Instant::now();
            assert!(now < deadline, "{what}: not within {HANG:?}");
            self.turn(now);
        }
    }

    /// One round: packets out, timers, one datagram in, events.
    fn turn(&mut self, now: Instant) {
        self.transmit(now);
        if self.conn.poll_timeout().is_some_and(|at| at <= now) {
            self.conn.handle_timeout(now);
        }
        self.receive(now);
        self.events();
    }

    /// Closes the connection (no error) and sends the close.
    pub fn close(&mut self) {
        self.conn
            .close(Instant::now(), VarInt::from_u32(0), bytes::Bytes::new());
        self.transmit(Instant::now());
    }

    fn read_into(&mut self, stream: StreamId, out: &mut Vec<u8>) {
        let mut recv = self.conn.recv_stream(stream);
        let Ok(mut chunks) = recv.read(true) else {
            return;
        };
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            out.extend_from_slice(&chunk.bytes);
        }
        let _ = chunks.finalize();
    }

    /// Drives the connection (packets out and in, timers, events) until `done`.
    fn pump(&mut self, what: &str, mut done: impl FnMut(&mut Self) -> bool) {
        let deadline = Instant::now() + HANG;
        loop {
            let now = Instant::now();
            assert!(now < deadline, "{what}: not within {HANG:?}");
            assert!(!self.lost, "{what}: the connection was lost");
            if done(self) {
                self.transmit(now);
                return;
            }
            self.turn(now);
        }
    }

    fn transmit(&mut self, now: Instant) {
        while let Some(event) = self.conn.poll_endpoint_events() {
            if let Some(reply) = self.endpoint.handle_event(self.handle, event) {
                self.conn.handle_event(reply);
            }
        }
        loop {
            self.buf.clear();
            let Some(transmit) = self.conn.poll_transmit(now, 1, &mut self.buf) else {
                return;
            };
            let datagram = &self.buf[..transmit.size];
            if let Some(recorded) = &mut self.recorded {
                recorded.push(datagram.to_vec());
            }
            if !self.holding_back {
                let _ = self.socket.send_to(datagram, transmit.destination);
            }
        }
    }

    fn receive(&mut self, now: Instant) {
        let mut data = vec![0u8; 65_536];
        let Ok((len, from)) = self.socket.recv_from(&mut data) else {
            return;
        };
        self.buf.clear();
        let packet = BytesMut::from(&data[..len]);
        let event = self
            .endpoint
            .handle(now, from, None, None, packet, &mut self.buf);
        if let Some(DatagramEvent::ConnectionEvent(_, event)) = event {
            self.conn.handle_event(event);
        }
    }

    fn events(&mut self) {
        while let Some(event) = self.conn.poll() {
            match event {
                Event::Connected => self.connected = true,
                Event::ConnectionLost { .. } => self.lost = true,
                _ => {}
            }
        }
    }
}

fn bound_socket() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    socket
}
