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

#[test]
fn header_timeout_is_bounded() {
    let http = validate("").expect("defaults validate");
    assert_eq!(http.header_timeout, std::time::Duration::from_secs(10));
    let error = validate("[http]\nheader_timeout_ms = 99\n").unwrap_err();
    assert!(error.contains("http.header_timeout_ms"), "{error}");
    let http = validate("[http]\nheader_timeout_ms = 250\n").expect("validates");
    assert_eq!(http.header_timeout, std::time::Duration::from_millis(250));
}

#[test]
fn the_history_interval_is_bounded() {
    let http = validate("").expect("defaults validate");
    assert_eq!(http.history_interval, std::time::Duration::from_secs(5));
    for bad in [99, 60_001] {
        let error = validate(&format!("[http]\nhistory_interval_ms = {bad}\n")).unwrap_err();
        assert!(error.contains("http.history_interval_ms"), "{error}");
    }
    let http = validate("[http]\nhistory_interval_ms = 200\n").expect("validates");
    assert_eq!(http.history_interval, std::time::Duration::from_millis(200));
}

#[test]
fn allowed_hosts_are_names_or_addresses_without_ports() {
    use super::HostName;
    let http = validate(
        "[http]\nallowed_hosts = [\"Broker.Example.\", \"10.0.0.5\", \"[fd00::1]\", \"*\"]\n",
    )
    .expect("validates");
    assert!(http.allowed_hosts.any);
    assert_eq!(
        http.allowed_hosts.hosts,
        [
            HostName::Name("broker.example".into()),
            HostName::Ip("10.0.0.5".parse().unwrap()),
            HostName::Ip("fd00::1".parse().unwrap()),
        ]
    );
    assert!(!validate("").expect("defaults").allowed_hosts.any);
    for bad in ["http://x", "x:80", "", "a..b", "bad name"] {
        let error = validate(&format!("[http]\nallowed_hosts = [{bad:?}]\n")).unwrap_err();
        assert!(error.contains("http.allowed_hosts"), "{bad}: {error}");
    }
}

#[test]
fn authorities_split_into_host_and_port() {
    use super::HostName;
    let name = |n: &str| HostName::Name(n.into());
    let ip = |a: &str| HostName::Ip(a.parse().unwrap());
    assert_eq!(
        HostName::parse_authority("LocalHost:18083"),
        Some((name("localhost"), Some(18083)))
    );
    assert_eq!(
        HostName::parse_authority("localhost"),
        Some((name("localhost"), None))
    );
    assert_eq!(
        HostName::parse_authority("localhost:"),
        Some((name("localhost"), None))
    );
    assert_eq!(
        HostName::parse_authority("[::1]:80"),
        Some((ip("::1"), Some(80)))
    );
    assert_eq!(HostName::parse_authority("[::1]"), Some((ip("::1"), None)));
    assert_eq!(
        HostName::parse_authority("127.0.0.1:1"),
        Some((ip("127.0.0.1"), Some(1)))
    );
    for bad in [
        "", "[::1", "[::1]x", "h:99999", "h:8x", "a b", "u@h", "[zz]",
    ] {
        assert_eq!(HostName::parse_authority(bad), None, "{bad}");
    }
}
