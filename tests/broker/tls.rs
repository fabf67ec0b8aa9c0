//! TLS and mutual-TLS listeners with real clients (mosquitto_pub/mosquitto_sub, rumqttc),
//! certificates made by the test (`pki.rs`); bad handshakes, reload, and start errors.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use codec::{Connect, QoS, ReasonCode};
use ringmq::auth::Authenticator;

use crate::client::{RawClient, V5, publish_packet};
use crate::harness::{BASE, TestBroker};
use crate::pki::{CertFiles, TestCa, TestPki};

/// The TOML of one `[[listeners.tls]]` table with `extra` keys.
fn tls_listener(pki: &TestPki, extra: &str) -> String {
    format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}{extra}",
        pki.listener_keys()
    )
}

/// Runs a mosquitto client (installed by the test command: Debian's mosquitto-clients).
fn mosquitto(tool: &str, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("20")
        .arg(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} runs (install mosquitto-clients): {e}"))
}

pub(crate) fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// mosquitto_pub over TLS to `port`, trusting `ca`, with an optional client certificate;
/// whether it succeeded.
pub(crate) fn publish_tls(
    port: u16,
    ca: &Path,
    cert: Option<&CertFiles>,
    extra: &[&str],
) -> Output {
    let port = port.to_string();
    let mut args = vec!["-h", "127.0.0.1", "-p", &port, "--cafile", path(ca)];
    if let Some(cert) = cert {
        args.extend(["--cert", path(&cert.cert), "--key", path(&cert.key)]);
    }
    args.extend(["-t", "tls/in", "-m", "over tls", "-q", "1"]);
    args.extend(extra);
    mosquitto("mosquitto_pub", &args)
}

#[test]
fn mosquitto_clients_publish_and_subscribe_over_tls() {
    let pki = TestPki::new();
    let broker = TestBroker::with_config(&tls_listener(&pki, ""));
    let port = broker.addr_of("tls").port();

    // TLS in, plain TCP out.
    let mut plain = RawClient::connected_clean(broker.addr(), V5, "plain-sub");
    plain.subscribe("tls/in", QoS::AtLeastOnce);
    let published = publish_tls(port, &pki.ca.cert, None, &[]);
    assert!(
        published.status.success(),
        "mosquitto_pub over TLS: {published:?}"
    );
    let received = plain.expect_publish_on("tls/in");
    assert_eq!(received.payload(), b"over tls");

    // Plain TCP in (retained), TLS out.
    let id = plain.next_packet_id();
    let mut retained = publish_packet("tls/out", b"to tls", QoS::AtLeastOnce, Some(id));
    retained.retain = true;
    plain.publish(retained);
    let port = port.to_string();
    let args = [
        "-h",
        "127.0.0.1",
        "-p",
        &port,
        "--cafile",
        path(&pki.ca.cert),
        "-t",
        "tls/out",
        "-C",
        "1",
        "-W",
        "10",
    ];
    let sub = mosquitto("mosquitto_sub", &args);
    assert!(sub.status.success(), "mosquitto_sub over TLS: {sub:?}");
    assert_eq!(String::from_utf8_lossy(&sub.stdout).trim(), "to tls");
}

#[test]
fn rumqttc_round_trips_over_tls() {
    let pki = TestPki::new();
    let broker = TestBroker::with_config(&tls_listener(&pki, ""));
    let addr = broker.addr_of("tls");
    let mut options = rumqttc::MqttOptions::new("rumqttc-tls", "127.0.0.1", addr.port());
    options.set_keep_alive(Duration::from_secs(30));
    let ca = std::fs::read(&pki.ca.cert).unwrap();
    options.set_transport(rumqttc::Transport::tls_with_config(
        rumqttc::TlsConfiguration::Simple {
            ca,
            alpn: None,
            client_auth: None,
        },
    ));
    let (client, mut connection) = rumqttc::Client::new(options, 16);
    client
        .subscribe("rumqttc/tls", rumqttc::QoS::AtLeastOnce)
        .unwrap();
    client
        .publish(
            "rumqttc/tls",
            rumqttc::QoS::AtLeastOnce,
            false,
            b"secret".to_vec(),
        )
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match connection.recv_timeout(left) {
            Ok(Ok(rumqttc::Event::Incoming(rumqttc::Packet::Publish(publish)))) => {
                assert_eq!(&publish.payload[..], b"secret");
                break;
            }
            Ok(Ok(_)) => {}
            other => panic!("rumqttc over TLS: {other:?}"),
        }
    }
}

#[test]
fn mutual_tls_requires_a_certificate_from_the_client_ca() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let alice = pki.ca.client(dir, "alice");
    let other_ca = TestCa::new(dir, "other-ca");
    let mallory = other_ca.client(dir, "mallory");
    let extra = format!(
        "client_ca = {:?}\nrequire_client_cert = true\n",
        path(&pki.ca.cert)
    );
    let broker = TestBroker::with_config(&tls_listener(&pki, &extra));
    let port = broker.addr_of("tls").port();

    let with_cert = publish_tls(port, &pki.ca.cert, Some(&alice), &[]);
    assert!(
        with_cert.status.success(),
        "client certificate accepted: {with_cert:?}"
    );
    let without = publish_tls(port, &pki.ca.cert, None, &[]);
    assert!(
        !without.status.success(),
        "no client certificate is refused"
    );
    let foreign = publish_tls(port, &pki.ca.cert, Some(&mallory), &[]);
    assert!(
        !foreign.status.success(),
        "a certificate from another CA is refused"
    );
    broker.assert_serving();
}

/// Allows only the user `alice`.
struct OnlyAlice;

impl Authenticator for OnlyAlice {
    fn authenticate(&self, connect: &Connect) -> Result<(), ReasonCode> {
        match connect.username.as_ref().map(|u| u.as_str()) {
            Some("alice") => Ok(()),
            _ => Err(ReasonCode::NotAuthorized),
        }
    }

    fn authorize_subscribe(&self, _client_id: &str, _filter: &str) -> bool {
        true
    }

    fn authorize_publish(&self, _client_id: &str, _topic: &str) -> bool {
        true
    }
}

#[test]
fn identity_as_username_takes_the_certificate_common_name() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let alice = pki.ca.client(dir, "alice");
    let carol = pki.ca.client(dir, "carol");
    let extra = format!(
        "client_ca = {:?}\nidentity_as_username = true\n",
        path(&pki.ca.cert)
    );
    let broker = TestBroker::with_auth(&tls_listener(&pki, &extra), Box::new(OnlyAlice));
    let port = broker.addr_of("tls").port();

    // The username the client sends is replaced by the certificate's CN.
    let as_alice = publish_tls(port, &pki.ca.cert, Some(&alice), &["-u", "bob"]);
    assert!(
        as_alice.status.success(),
        "CN alice is the username: {as_alice:?}"
    );
    let as_carol = publish_tls(port, &pki.ca.cert, Some(&carol), &["-u", "alice"]);
    assert!(
        !as_carol.status.success(),
        "CN carol is the username, not the one sent"
    );
    let no_cert = publish_tls(port, &pki.ca.cert, None, &["-u", "alice"]);
    assert!(
        !no_cert.status.success(),
        "no certificate: no username, refused"
    );
}

/// Reads until the broker closes; what it sent.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = Vec::new();
    let mut buf = [0; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return received,
            Err(e) => panic!("the broker did not close the connection: {e}"),
        }
    }
}

#[test]
fn plain_mqtt_garbage_and_silence_on_the_tls_port_are_closed() {
    let pki = TestPki::new();
    let config = format!(
        "[connection]\nconnect_timeout = 1\n{}",
        tls_listener(&pki, "")
    );
    let broker = TestBroker::with_config(&config);
    let tls = broker.addr_of("tls");

    // A plain MQTT CONNECT: answered with a TLS alert at most, never a CONNACK.
    let mut plain = TcpStream::connect(tls).unwrap();
    let mut connect = bytes::BytesMut::new();
    codec::encode(
        &codec::Packet::Connect(Box::new(crate::client::connect_packet(
            V5,
            "plain-on-tls",
            true,
        ))),
        V5,
        &mut connect,
    )
    .unwrap();
    std::io::Write::write_all(&mut plain, &connect).unwrap();
    let answer = read_until_closed(&mut plain);
    assert!(
        answer.is_empty() || answer[0] == 0x15,
        "only a TLS alert (content type 21) may come back: {answer:?}"
    );

    // Garbage.
    let mut garbage = TcpStream::connect(tls).unwrap();
    std::io::Write::write_all(&mut garbage, &[0xff; 300]).unwrap();
    read_until_closed(&mut garbage);

    // A handshake that never starts ends with the CONNECT timeout.
    let mut silent = TcpStream::connect(tls).unwrap();
    assert!(read_until_closed(&mut silent).is_empty());

    broker.assert_serving();
    let good = publish_tls(tls.port(), &pki.ca.cert, None, &[]);
    assert!(good.status.success(), "TLS clients still served: {good:?}");
}

#[test]
fn sighup_reload_serves_new_handshakes_with_the_new_certificate_and_keeps_open_ones() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let broker = TestBroker::with_config(&tls_listener(&pki, ""));
    let port = broker.addr_of("tls").port();
    let port_text = port.to_string();
    // A subscriber connected with the old certificate, waiting for one message.
    let old_sub = Command::new("timeout")
        .args(["20", "mosquitto_sub", "-h", "127.0.0.1", "-p", &port_text])
        .args([
            "--cafile",
            path(&pki.ca.cert),
            "-t",
            "reload/t",
            "-C",
            "1",
            "-q",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("mosquitto_sub runs");
    crate::harness::wait_until("the old subscriber subscribed", || {
        (broker.metrics().subscriptions >= 1).then_some(())
    });

    // New CA, new server certificate, written over the configured files.
    let new_ca = TestCa::new(dir, "new-ca");
    let fresh = new_ca.server(dir, "fresh");
    std::fs::copy(&fresh.cert, &pki.server.cert).unwrap();
    std::fs::copy(&fresh.key, &pki.server.key).unwrap();
    let before = publish_tls(port, &new_ca.cert, None, &[]);
    assert!(
        !before.status.success(),
        "the old certificate is served until the reload"
    );
    assert_eq!(broker.reload_certificates(), Vec::<String>::new());
    let after = publish_tls(port, &new_ca.cert, None, &["-t", "reload/t"]);
    assert!(
        after.status.success(),
        "new handshakes get the new certificate: {after:?}"
    );
    let old = publish_tls(port, &pki.ca.cert, None, &[]);
    assert!(
        !old.status.success(),
        "the old certificate is gone for new handshakes"
    );
    let received = old_sub.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&received.stdout).trim(), "over tls");

    // A broken file on reload: the error names it, the current certificate stays.
    std::fs::write(&pki.server.key, "not a key").unwrap();
    let errors = broker.reload_certificates();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains(path(&pki.server.key)), "{errors:?}");
    let still = publish_tls(port, &new_ca.cert, None, &[]);
    assert!(
        still.status.success(),
        "a failed reload keeps the loaded certificate"
    );
}

pub(crate) fn start_error(listener: &str) -> String {
    let mut raw = ringmq::config::default_raw().unwrap();
    raw.overlay(ringmq::config::parse_raw("base", BASE).unwrap());
    raw.overlay(ringmq::config::parse_raw("test", listener).unwrap());
    let config = raw.validate().expect("config validates");
    match ringmq::Broker::start(config) {
        Ok(_) => panic!("the broker started with {listener}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn unreadable_or_mismatched_certificate_files_stop_the_start_naming_the_file() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let missing = dir.join("missing.pem");
    let listener = format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\n",
        path(&missing),
        path(&pki.server.key)
    );
    let error = start_error(&listener);
    assert!(error.contains(path(&missing)), "{error}");

    let other = pki.ca.server(dir, "other");
    let mismatched = format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\ncert = {:?}\nkey = {:?}\n",
        path(&pki.server.cert),
        path(&other.key)
    );
    let error = start_error(&mismatched);
    assert!(
        error.contains(path(&pki.server.cert)) && error.contains("do not make a usable pair"),
        "{error}"
    );
}

/// The binary: SIGHUP reloads the certificate files; a config whose key file is missing stops
/// it at start with an error naming the file.
#[test]
fn the_binary_reloads_certificates_on_sighup_and_refuses_a_missing_key() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let port = crate::ports::free_port();
    let config = dir.join("ringmq.toml");
    let listener = format!(
        "[listeners]\ntcp = []\n[[listeners.tls]]\nbind = \"127.0.0.1:{port}\"\n{}",
        pki.listener_keys()
    );
    std::fs::write(
        &config,
        format!("[persistence]\nengine = \"none\"\n{listener}"),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start the broker binary");
    crate::harness::wait_until("the binary listens", || {
        TcpStream::connect(("127.0.0.1", port)).ok().map(drop)
    });
    let new_ca = TestCa::new(dir, "new-ca");
    let fresh = new_ca.server(dir, "fresh");
    std::fs::copy(&fresh.cert, &pki.server.cert).unwrap();
    std::fs::copy(&fresh.key, &pki.server.key).unwrap();
    let pid = child.id().to_string();
    let hup = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert!(hup.success());
    // The reload is asynchronous: new handshakes switch to the new certificate soon after.
    crate::harness::wait_until("a handshake with the new certificate", || {
        publish_tls(port, &new_ca.cert, None, &[])
            .status
            .success()
            .then_some(())
    });
    let _ = child.kill();
    let _ = child.wait();

    std::fs::remove_file(&pki.server.key).unwrap();
    let failed = Command::new(env!("CARGO_BIN_EXE_ringmq"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains(path(&pki.server.key)), "{stderr}");
}

/// Runs `openssl` with `args`; it must succeed.
fn openssl(args: &[&str]) {
    let output = Command::new("openssl").args(args).output().unwrap();
    assert!(output.status.success(), "openssl {args:?}: {output:?}");
}

/// A new P-256 key and a certificate request for CN `name`, in `dir`: (key, request).
fn openssl_request(dir: &Path, name: &str) -> (String, String) {
    let key = path(&dir.join(format!("{name}.key"))).to_owned();
    let request = path(&dir.join(format!("{name}.csr"))).to_owned();
    let subject = format!("/CN={name}");
    openssl(&[
        "req",
        "-new",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &request,
        "-subj",
        &subject,
    ]);
    (key, request)
}

/// A CA made with openssl as operators make them: `req -x509` (v3, basicConstraints CA:TRUE)
/// or, with `v1`, `x509 -req -signkey` (v1, no extensions).
fn openssl_ca(dir: &Path, name: &str, v1: bool) -> CertFiles {
    let (key, request) = openssl_request(dir, name);
    let cert = path(&dir.join(format!("{name}.pem"))).to_owned();
    if v1 {
        openssl(&[
            "x509", "-req", "-in", &request, "-signkey", &key, "-out", &cert,
        ]);
    } else {
        let subject = format!("/CN={name}");
        openssl(&[
            "req", "-x509", "-key", &key, "-out", &cert, "-subj", &subject,
        ]);
    }
    CertFiles {
        cert: cert.into(),
        key: key.into(),
    }
}

/// A client certificate `ca` signs with `openssl x509 -req`: X.509 v1 without `extfile`, v3
/// with the extensions in it.
fn openssl_client(dir: &Path, ca: &CertFiles, name: &str, extfile: Option<&Path>) -> CertFiles {
    let (key, request) = openssl_request(dir, name);
    let cert = path(&dir.join(format!("{name}.pem"))).to_owned();
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &request,
        "-CA",
        path(&ca.cert),
        "-CAkey",
        path(&ca.key),
        "-CAcreateserial",
        "-out",
        &cert,
    ];
    if let Some(extfile) = extfile {
        args.extend(["-extfile", path(extfile)]);
    }
    openssl(&args);
    CertFiles {
        cert: cert.into(),
        key: key.into(),
    }
}

/// A client certificate made by `openssl x509 -req` without `-extfile` is X.509 v1, which
/// mosquitto accepts and webpki does not: the refusal is logged at warn with its cause and fix
/// (issue 47, defect 11), not only at debug. A v1 CA in `client_ca` is fine (a trust anchor):
/// a v3 client certificate it signed connects.
#[test]
fn a_v1_client_certificate_is_refused_with_a_warning_that_names_the_fix() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let v3_ca = openssl_ca(dir, "openssl-v3-ca", false);
    let v1_ca = openssl_ca(dir, "openssl-v1-ca", true);
    let extfile = dir.join("client.ext");
    std::fs::write(
        &extfile,
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    let v1_client = openssl_client(dir, &v3_ca, "v1-client", None);
    let v3_client = openssl_client(dir, &v1_ca, "v3-client", Some(&extfile));
    let client_ca = dir.join("client-ca.pem");
    let both = [&v3_ca.cert, &v1_ca.cert].map(|ca| std::fs::read_to_string(ca).unwrap());
    std::fs::write(&client_ca, both.concat()).unwrap();
    let port = crate::ports::free_port();
    let config = dir.join("ringmq.toml");
    let listener = format!(
        "[listeners]\ntcp = []\n[[listeners.tls]]\nbind = \"127.0.0.1:{port}\"\n{}\
         client_ca = {:?}\nrequire_client_cert = true\n[persistence]\nengine = \"none\"\n",
        pki.listener_keys(),
        path(&client_ca)
    );
    std::fs::write(&config, listener).unwrap();
    let broker = crate::binary::BrokerProcess::start(&config);

    let refused = publish_tls(port, &pki.ca.cert, Some(&v1_client), &[]);
    assert!(!refused.status.success(), "{refused:?}");
    let log = broker.wait_for_log("TLS client certificate refused");
    let warning = log
        .lines()
        .find(|line| line.contains("TLS client certificate refused"))
        .unwrap();
    assert!(
        warning.contains(" WARN ")
            && warning.contains("client certificate is X.509 v1 (no extensions)")
            && warning.contains("-extfile")
            && warning.contains("extendedKeyUsage=clientAuth"),
        "{warning}"
    );
    let accepted = publish_tls(port, &pki.ca.cert, Some(&v3_client), &[]);
    assert!(
        accepted.status.success(),
        "v3, signed by a v1 CA: {accepted:?}"
    );
}
