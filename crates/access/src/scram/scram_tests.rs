//! The SCRAM server against RFC 7677's example exchange, a SHA-512 client computed here from
//! RFC 5802's formulas, the refusals, and the credential file parser.

use std::num::NonZeroU32;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::{digest, hmac, pbkdf2};

use super::ScramError;
use super::file::ScramFile;
use super::server::ScramServer;
use super::{Mechanism, ScramCredential};
use crate::{AccessFileError, LineProblem};

const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn iterations(count: u32) -> NonZeroU32 {
    NonZeroU32::new(count).unwrap()
}

fn rfc_credential() -> ScramCredential {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    ScramCredential::derive(Mechanism::Sha256, b"pencil", &salt, iterations(4096))
}

fn rfc_start(client_first: &str) -> Result<(ScramServer, Vec<u8>), ScramError> {
    let credential = rfc_credential();
    let lookup = |user: &str| (user == "user").then(|| credential.clone());
    ScramServer::start_with_nonce(
        Mechanism::Sha256,
        client_first.as_bytes(),
        lookup,
        RFC_SERVER_NONCE,
    )
}

#[test]
fn rfc_7677_example_exchange() {
    let (server, server_first) = rfc_start(RFC_CLIENT_FIRST).unwrap();
    assert_eq!(String::from_utf8(server_first).unwrap(), RFC_SERVER_FIRST);
    assert_eq!(server.username(), "user");
    let success = server.finish(RFC_CLIENT_FINAL.as_bytes()).unwrap();
    assert_eq!(success.username, "user");
    assert_eq!(
        String::from_utf8(success.server_final).unwrap(),
        RFC_SERVER_FINAL
    );
}

#[test]
fn a_wrong_password_fails_the_proof() {
    let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let other = ScramCredential::derive(Mechanism::Sha256, b"pen", &salt, iterations(4096));
    let (server, _) = ScramServer::start_with_nonce(
        Mechanism::Sha256,
        RFC_CLIENT_FIRST.as_bytes(),
        |_| Some(other),
        RFC_SERVER_NONCE,
    )
    .unwrap();
    assert_eq!(
        server.finish(RFC_CLIENT_FINAL.as_bytes()),
        Err(ScramError::WrongProof)
    );
}

#[test]
fn an_unknown_user_gets_a_server_first_then_fails() {
    let (server, server_first) =
        ScramServer::start(Mechanism::Sha256, b"n,,n=nobody,r=abcdef", |_| None).unwrap();
    let text = String::from_utf8(server_first).unwrap();
    assert!(text.starts_with("r=abcdef") && text.contains(",s=") && text.ends_with(",i=4096"));
    let nonce = &text[2..text.find(",s=").unwrap()];
    let client_final = format!("c=biws,r={nonce},p={}", BASE64.encode([0u8; 32]));
    assert_eq!(
        server.finish(client_final.as_bytes()),
        Err(ScramError::UnknownUser)
    );
}

#[test]
fn malformed_client_first_messages_are_refused() {
    let cases: [(&str, ScramError); 7] = [
        (
            "p=tls-unique,,n=user,r=abc",
            ScramError::ChannelBindingUnsupported,
        ),
        (
            "x,,n=user,r=abc",
            ScramError::Malformed("unknown channel binding flag"),
        ),
        ("n,,r=abc", ScramError::MissingAttribute('n')),
        ("n,,n=user", ScramError::MissingAttribute('r')),
        (
            "n,,m=ext,n=user,r=abc",
            ScramError::Malformed("mandatory extension m= is not supported"),
        ),
        (
            "n,,n=us=er,r=abc",
            ScramError::Malformed("bad `=` escape in the username"),
        ),
        ("garbage", ScramError::Malformed("no GS2 header")),
    ];
    for (message, expected) in cases {
        assert_eq!(rfc_start(message).err(), Some(expected), "{message}");
    }
    assert_eq!(
        ScramServer::start(Mechanism::Sha256, &[0xff, 0xfe], |_| None).err(),
        Some(ScramError::NotUtf8)
    );
}

#[test]
fn y_flag_and_escaped_usernames_are_accepted() {
    let (server, _) = rfc_start("y,,n=a=2Cb=3Dc,r=abc").unwrap();
    assert_eq!(server.username(), "a,b=c");
}

#[test]
fn client_final_must_repeat_nonce_and_header() {
    let (server, _) = rfc_start(RFC_CLIENT_FIRST).unwrap();
    let wrong_nonce = RFC_CLIENT_FINAL.replace("k0,p=", "k1,p=");
    assert_eq!(
        server.clone().finish(wrong_nonce.as_bytes()),
        Err(ScramError::NonceMismatch)
    );
    let wrong_header = RFC_CLIENT_FINAL.replace("c=biws", "c=eSws");
    assert_eq!(
        server.clone().finish(wrong_header.as_bytes()),
        Err(ScramError::ChannelBindingMismatch)
    );
    assert_eq!(
        server.finish(b"c=biws,r=x"),
        Err(ScramError::Malformed("client-final has no proof"))
    );
}

/// RFC 5802's client side for SHA-512, computed here with ring's primitives directly.
fn sha512_client_proof(password: &str, salt: &[u8], count: u32, auth_message: &str) -> Vec<u8> {
    let mut salted = [0u8; 64];
    pbkdf2::derive(
        pbkdf2::PBKDF2_HMAC_SHA512,
        iterations(count),
        salt,
        password.as_bytes(),
        &mut salted,
    );
    let key = hmac::Key::new(hmac::HMAC_SHA512, &salted);
    let client_key = hmac::sign(&key, b"Client Key");
    let stored_key = digest::digest(&digest::SHA512, client_key.as_ref());
    let signature = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA512, stored_key.as_ref()),
        auth_message.as_bytes(),
    );
    client_key
        .as_ref()
        .iter()
        .zip(signature.as_ref())
        .map(|(k, s)| k ^ s)
        .collect()
}

#[test]
fn sha512_exchange_with_a_derived_credential() {
    let credential = ScramCredential::derive(
        Mechanism::Sha512,
        b"s3cret",
        b"0123456789abcdef",
        iterations(4096),
    );
    let (server, server_first) =
        ScramServer::start(Mechanism::Sha512, b"n,,n=alice,r=clientnonce", |user| {
            (user == "alice").then(|| credential.clone())
        })
        .unwrap();
    let server_first = String::from_utf8(server_first).unwrap();
    let nonce = &server_first[2..server_first.find(",s=").unwrap()];
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("n=alice,r=clientnonce,{server_first},{without_proof}");
    let proof = sha512_client_proof("s3cret", b"0123456789abcdef", 4096, &auth_message);
    let client_final = format!("{without_proof},p={}", BASE64.encode(proof));
    let success = server.finish(client_final.as_bytes()).unwrap();
    assert_eq!(success.username, "alice");
    assert!(success.server_final.starts_with(b"v="));
}

#[test]
fn credential_file_round_trips_and_keeps_one_line_per_mechanism() {
    let rfc = rfc_credential();
    let sha512 = ScramCredential::derive(Mechanism::Sha512, b"x", b"salt", iterations(1));
    let text = format!(
        "# comment\n\n{}\n{}\n",
        rfc.file_line("user"),
        sha512.file_line("user")
    );
    let file = ScramFile::parse(&text).unwrap();
    assert_eq!(file.len(), 2);
    assert_eq!(file.credential("user", Mechanism::Sha256), Some(&rfc));
    assert_eq!(file.credential("user", Mechanism::Sha512), Some(&sha512));
    assert_eq!(file.credential("other", Mechanism::Sha256), None);
}

fn line_error(text: &str) -> (usize, LineProblem) {
    match ScramFile::parse(text) {
        Err(AccessFileError::Line { line, problem, .. }) => (line, problem),
        other => panic!("expected a line error, got {other:?}"),
    }
}

#[test]
fn credential_file_errors_name_the_line() {
    let good = rfc_credential().file_line("user");
    let key = BASE64.encode([0u8; 32]);
    assert_eq!(
        line_error(&format!("{good}\nbob:SCRAM-SHA-256:4096:c2FsdA==\n")),
        (2, LineProblem::MalformedScramLine)
    );
    assert_eq!(
        line_error(&format!("bob:SCRAM-MD5:1:c2FsdA==:{key}:{key}")),
        (1, LineProblem::UnknownScramMechanism("SCRAM-MD5".into()))
    );
    assert_eq!(
        line_error(&format!("#\nbob:SCRAM-SHA-256:0:c2FsdA==:{key}:{key}")),
        (2, LineProblem::InvalidIterations("0".into()))
    );
    assert_eq!(
        line_error(&format!("bob:SCRAM-SHA-256:1:c2FsdA==:{key}:!!")),
        (1, LineProblem::InvalidBase64 { field: "ServerKey" })
    );
    assert_eq!(
        line_error(&format!("bob:SCRAM-SHA-512:1:c2FsdA==:{key}:{key}")).1,
        LineProblem::WrongLength {
            field: "StoredKey",
            actual: 32,
            expected: 64
        }
    );
    assert_eq!(
        line_error(&format!("{good}\n{good}")),
        (2, LineProblem::DuplicateUser("user".into()))
    );
    let message = ScramFile::parse("x").unwrap_err().to_string();
    assert!(message.contains("line 1"), "{message}");
}

#[test]
fn adding_a_credential_replaces_the_same_user_and_mechanism_only() {
    let first = ScramCredential::derive(Mechanism::Sha256, b"one", b"salt1", iterations(1));
    let second = ScramCredential::derive(Mechanism::Sha256, b"two", b"salt2", iterations(1));
    let other = ScramCredential::derive(Mechanism::Sha512, b"one", b"salt3", iterations(1));
    let text = super::file::with_credential("# users\n", "bob", &first).unwrap();
    let text = super::file::with_credential(&text, "bob", &other).unwrap();
    let text = super::file::with_credential(&text, "bob", &second).unwrap();
    assert!(text.starts_with("# users\n"), "{text}");
    let file = ScramFile::parse(&text).unwrap();
    assert_eq!(file.len(), 2);
    assert_eq!(file.credential("bob", Mechanism::Sha256), Some(&second));
    assert_eq!(file.credential("bob", Mechanism::Sha512), Some(&other));
    assert_eq!(
        super::file::with_credential(&text, "a\nb", &first),
        Err(LineProblem::MalformedScramLine)
    );
}
