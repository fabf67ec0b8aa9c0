//! Validation of `[auth.scram]` and `[auth.http]`'s AUTH exchange keys: what is read, and errors
//! naming the key.

use access::scram::Mechanism;
use access::settings::ScramStore;

use crate::config::{default_raw, parse_raw};

fn validate(text: &str) -> Result<crate::config::Config, String> {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("t", text).map_err(|e| e.to_string())?);
    raw.validate().map_err(|e| e.to_string())
}

#[test]
fn scram_reads_its_file_and_mechanisms() {
    let config = validate("[auth.scram]\nfile = \"creds\"\n").unwrap();
    let scram = config.core.auth.scram.unwrap();
    assert_eq!(scram.store, ScramStore::File("creds".into()));
    assert_eq!(scram.mechanisms, Mechanism::ALL.to_vec());
    let config = validate("[auth.scram]\nfile = \"c\"\nmechanisms = [\"SCRAM-SHA-512\"]\n");
    let auth = config.unwrap().core.auth;
    assert_eq!(
        auth.scram_mechanism("SCRAM-SHA-512"),
        Some(Mechanism::Sha512)
    );
    assert_eq!(auth.scram_mechanism("SCRAM-SHA-256"), None);
}

#[test]
fn scram_errors_name_the_key() {
    let cases = [
        (
            "[auth.scram]\nmechanisms = [\"SCRAM-SHA-256\"]\n",
            "auth.scram.file",
        ),
        (
            "[auth.scram]\nfile = \"c\"\nmechanisms = [\"SCRAM-SHA-1\"]\n",
            "auth.scram.mechanisms",
        ),
        (
            "[auth.scram]\nfile = \"c\"\nmechanisms = []\n",
            "auth.scram.mechanisms",
        ),
        ("[auth.scram]\nstore = \"redis\"\n", "auth.scram.store"),
        ("[auth.scram]\nstore = \"ldap\"\n", "auth.scram.store"),
    ];
    for (text, key) in cases {
        let error = validate(text).unwrap_err();
        assert!(error.contains(key), "{text}: {error}");
    }
}

#[test]
fn http_exchange_needs_both_its_url_and_its_methods() {
    let http = "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"http://127.0.0.1:1/l\"\n";
    let config = validate(&format!(
        "{http}auth_exchange_url = \"http://127.0.0.1:1/x\"\nauth_methods = [\"OTP\"]\n"
    ))
    .unwrap();
    assert!(config.core.auth.http_drives("OTP"));
    assert!(!config.core.auth.http_drives("SCRAM-SHA-256"));
    let error = validate(&format!("{http}auth_methods = [\"OTP\"]\n")).unwrap_err();
    assert!(error.contains("auth.http.auth_exchange_url"), "{error}");
    let error = validate(&format!("{http}auth_exchange_url = \"http://h/x\"\n")).unwrap_err();
    assert!(error.contains("auth.http.auth_methods"), "{error}");
    let error = validate(&format!("{http}auth_exchange_url = \"ftp://h/x\"\n")).unwrap_err();
    assert!(error.contains("auth.http.auth_exchange_url"), "{error}");
}
