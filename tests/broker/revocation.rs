//! Certificate revocation on TLS listeners (issue 49): `crl_file` refuses a revoked client
//! certificate (tried with mosquitto_pub, an OpenSSL client) and is read again on reload;
//! `ocsp_response_file` staples a real OCSP response (made with `openssl ocsp`) that
//! `openssl s_client -status` reads as good. Certificates and the CRL are made by the test.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test, with its location"
)]

use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::TestBroker;
use crate::pki::TestPki;
use crate::tls::{path, publish_tls};

/// A broker with a mutual-TLS listener of `pki` whose client certificates are checked against
/// the CRL at `crl`.
fn broker_with_crl(pki: &TestPki, crl: &Path) -> TestBroker {
    TestBroker::with_config(&format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}client_ca = {:?}\nrequire_client_cert = true\n\
         crl_file = {:?}\n",
        pki.listener_keys(),
        path(&pki.ca.cert),
        path(crl)
    ))
}

#[test]
fn a_revoked_client_certificate_is_refused_and_a_reloaded_list_revokes_more() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    let alice = pki.ca.client_numbered(dir, "alice", 11);
    let mallory = pki.ca.client_numbered(dir, "mallory", 12);
    let crl = dir.join("ca.crl.pem");
    pki.ca.write_crl(&crl, &[12]);
    let broker = broker_with_crl(&pki, &crl);
    let port = broker.addr_of("tls").port();
    let ok = publish_tls(port, &pki.ca.cert, Some(&alice), &[]);
    assert!(ok.status.success(), "alice refused: {ok:?}");
    let refused = publish_tls(port, &pki.ca.cert, Some(&mallory), &[]);
    assert!(!refused.status.success(), "a revoked certificate connected");

    pki.ca.write_crl(&crl, &[11, 12]);
    assert!(broker.reload_certificates().is_empty());
    let now_refused = publish_tls(port, &pki.ca.cert, Some(&alice), &[]);
    assert!(
        !now_refused.status.success(),
        "the reloaded list did not revoke alice"
    );
}

#[test]
fn a_crl_without_client_ca_or_unreadable_is_refused_naming_it() {
    let pki = TestPki::new();
    let crl = pki.dir.path().join("ca.crl.pem");
    let table = "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n";
    let without_ca = format!(
        "{table}{}crl_file = {:?}\n",
        pki.listener_keys(),
        path(&crl)
    );
    let mut raw = ringmq::config::default_raw().unwrap();
    raw.overlay(ringmq::config::parse_raw("test", &without_ca).unwrap());
    let error = raw.validate().unwrap_err().to_string();
    assert!(
        error.contains("crl_file") && error.contains("client_ca"),
        "{error}"
    );
    std::fs::write(&crl, "not a CRL").unwrap();
    let error = crate::tls::start_error(&format!(
        "{table}{}client_ca = {:?}\ncrl_file = {:?}\n",
        pki.listener_keys(),
        path(&pki.ca.cert),
        path(&crl)
    ));
    assert!(error.contains(path(&crl)), "{error}");
}

/// Runs `openssl` with `args` in `dir`; it must succeed. Its stdout.
fn openssl(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "openssl {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_stapled_ocsp_response_reaches_the_client() {
    let pki = TestPki::new();
    let dir = pki.dir.path();
    pki.ca.write_key(&dir.join("ca.key"));
    // openssl's CA database naming the server certificate as valid.
    let serial = openssl(
        dir,
        &["x509", "-noout", "-serial", "-in", path(&pki.server.cert)],
    );
    let serial = serial.trim().trim_start_matches("serial=").to_owned();
    let index = format!("V\t991231235959Z\t\t{serial}\tunknown\t/CN=ringmq test server\n");
    std::fs::write(dir.join("index.txt"), index).unwrap();
    let ca = path(&pki.ca.cert);
    let server = path(&pki.server.cert);
    openssl(
        dir,
        &[
            "ocsp",
            "-index",
            "index.txt",
            "-rsigner",
            ca,
            "-rkey",
            "ca.key",
            "-CA",
            ca,
            "-issuer",
            ca,
            "-cert",
            server,
            "-respout",
            "ocsp.der",
            "-ndays",
            "7",
        ],
    );
    let broker = TestBroker::with_config(&format!(
        "[[listeners.tls]]\nbind = \"127.0.0.1:0\"\n{}ocsp_response_file = {:?}\n",
        pki.listener_keys(),
        path(&dir.join("ocsp.der"))
    ));
    let target = format!("127.0.0.1:{}", broker.addr_of("tls").port());
    let shown = openssl(
        dir,
        &["s_client", "-connect", &target, "-status", "-CAfile", ca],
    );
    assert!(
        shown.contains("OCSP Response Status: successful"),
        "{shown}"
    );
    assert!(shown.contains("Cert Status: good"), "{shown}");
}
