//! Validation of `[http]`: off by default, credentials off loopback, paired keys, hidden secrets.

use crate::config::{default_raw, parse_raw};

fn validate(text: &str) -> Result<super::HttpSettings, String> {
    let mut raw = default_raw().expect("defaults parse");
    raw.overlay(parse_raw("t", text).expect("test TOML parses"));
    raw.validate().map(|c| c.http).map_err(|e| e.to_string())
}

#[test]
fn off_by_default() {
    let http = validate("").expect("defaults validate");
    assert!(!http.enabled());
    assert_eq!(http.max_connections, 16);
}

#[test]
fn a_public_bind_needs_credentials() {
    let error = validate("[http]\nbind = \"0.0.0.0:18083\"\n").unwrap_err();
    assert!(error.contains("http.token"), "{error}");
    assert!(validate("[http]\nbind = \"0.0.0.0:18083\"\ntoken = \"t\"\n").is_ok());
    let basic = "[http]\nbind = \"0.0.0.0:18083\"\nusername = \"u\"\npassword = \"p\"\n";
    assert!(validate(basic).is_ok());
    assert!(validate("[http]\nbind = \"127.0.0.1:18083\"\n").is_ok());
}

#[test]
fn half_set_pairs_name_the_missing_key() {
    let error = validate("[http]\nusername = \"u\"\n").unwrap_err();
    assert!(error.contains("http.password"), "{error}");
    let error = validate("[http]\ntls_cert_file = \"c.pem\"\n").unwrap_err();
    assert!(error.contains("http.tls_key_file"), "{error}");
    let error = validate("[http]\nmax_connections = 0\n").unwrap_err();
    assert!(error.contains("http.max_connections"), "{error}");
}

#[test]
fn secrets_are_not_printed() {
    let http = validate("[http]\ntoken = \"hunter2\"\n").expect("validates");
    assert!(!format!("{http:?}").contains("hunter2"));
}
