//! Every secret-bearing key stays out of [`redacted_toml`] (what `--check-config` prints and the
//! admin API shows) and out of the validation errors, one test per key; the other keys print
//! as [`effective_toml`] does.

use super::*;
use crate::config::{default_raw, parse_raw};

/// The defaults overlaid with `text`, validated; the effective and the redacted text.
fn printed(text: &str) -> (String, String) {
    let mut raw = default_raw().unwrap();
    raw.overlay(parse_raw("test", text).unwrap());
    let config = raw.validate().unwrap();
    (
        effective_toml(&raw, &config).unwrap(),
        redacted_toml(&raw, &config).unwrap(),
    )
}

/// `text` printed redacted: none of `secrets` is in it, `shown` is, the header says so, and
/// the text is still a config file with known keys. The redacted text.
#[track_caller]
fn hides(text: &str, secrets: &[&str], shown: &str) -> String {
    let (effective, redacted) = printed(text);
    for secret in secrets {
        assert!(
            effective.contains(secret),
            "{secret} is in the config:\n{effective}"
        );
        assert!(!redacted.contains(secret), "{secret} shown:\n{redacted}");
    }
    assert!(redacted.contains(shown), "{shown} missing:\n{redacted}");
    assert!(
        redacted.contains("# secrets, shown as \"<redacted>\", are put back."),
        "{redacted}"
    );
    parse_raw("redacted", &redacted).expect("the redacted text parses");
    redacted
}

const BRIDGE: &str = "[[bridges]]\nname = \"cloud\"\naddress = \"broker.example.com:8883\"\n\
                      client_id = \"edge-1\"\nusername = \"edge\"\n\
                      topics = [{ pattern = \"a/#\", direction = \"out\", qos = 1 }]\n";

#[test]
fn http_token_is_hidden() {
    hides(
        "[http]\nbind = \"127.0.0.1:0\"\ntoken = \"t0ken-s3cret\"\n",
        &["t0ken-s3cret"],
        "token = \"<redacted>\"",
    );
}

#[test]
fn http_password_is_hidden_and_the_username_kept() {
    let shown = hides(
        "[http]\nbind = \"127.0.0.1:0\"\nusername = \"ops\"\npassword = \"http-s3cret\"\n",
        &["http-s3cret"],
        "password = \"<redacted>\"",
    );
    assert!(shown.contains("username = \"ops\""), "{shown}");
}

#[test]
fn bridges_password_is_hidden() {
    let shown = hides(
        &format!("{BRIDGE}password = \"remote-s3cret\"\n"),
        &["remote-s3cret"],
        "password = \"<redacted>\"",
    );
    assert!(shown.contains("username = \"edge\""), "{shown}");
}

#[test]
fn bridges_local_password_is_hidden() {
    hides(
        &format!("{BRIDGE}local_username = \"bridge\"\nlocal_password = \"local-s3cret\"\n"),
        &["local-s3cret"],
        "local_password = \"<redacted>\"",
    );
}

const CLUSTER: &str = "[cluster]\nnode_id = \"n1\"\n";

#[test]
fn cluster_nats_token_is_hidden() {
    hides(
        &format!("{CLUSTER}nats = [\"nats://NATS-T0KEN@127.0.0.1:4222\"]\n"),
        &["NATS-T0KEN"],
        "nats = [\"nats://<redacted>@127.0.0.1:4222\"]",
    );
}

#[test]
fn cluster_nats_password_is_hidden_and_the_user_kept() {
    hides(
        &format!(
            "{CLUSTER}nats = [\"nats://127.0.0.1:4222\", \"tls://node:nats-s3cret@[::1]:4222\"]\n"
        ),
        &["nats-s3cret"],
        "nats = [\"nats://127.0.0.1:4222\", \"tls://node:<redacted>@[::1]:4222\"]",
    );
}

#[test]
fn cluster_nats_password_with_an_at_sign_is_hidden_whole() {
    hides(
        &format!("{CLUSTER}nats = [\"nats://node:pa@ss-s3cret@127.0.0.1:4222\"]\n"),
        &["ss-s3cret", "pa@"],
        "nats://node:<redacted>@127.0.0.1:4222",
    );
}

#[test]
fn auth_redis_url_password_is_hidden() {
    hides(
        "[auth]\nbackends = [\"redis\"]\n\
         [auth.redis]\nurl = \"redis://ringmq:pa@ss-s3cret@127.0.0.1:6379/0\"\n",
        &["ss-s3cret", "pa@"],
        "url = \"redis://ringmq:<redacted>@127.0.0.1:6379/0\"",
    );
    hides(
        "[auth]\nbackends = [\"redis\"]\n[auth.redis]\nurl = \"redis://:pa55@127.0.0.1:6379/0\"\n",
        &["pa55"],
        "url = \"redis://:<redacted>@127.0.0.1:6379/0\"",
    );
}

#[test]
fn auth_http_login_url_credentials_are_hidden() {
    hides(
        "[auth]\nbackends = [\"http\"]\n\
         [auth.http]\nlogin_url = \"https://broker:login-s3cret@auth.local/login?for=a@b\"\n",
        &["login-s3cret"],
        "login_url = \"https://broker:<redacted>@auth.local/login?for=a@b\"",
    );
}

#[test]
fn auth_http_acl_url_token_is_hidden() {
    hides(
        "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"http://auth.local/login\"\n\
         acl_url = \"http://acl-t0ken@auth.local/acl\"\n",
        &["acl-t0ken"],
        "acl_url = \"http://<redacted>@auth.local/acl\"",
    );
}

/// A backend table that `auth.backends` does not list is printed as written: redacted too.
#[test]
fn an_unused_backend_table_is_redacted_too() {
    hides(
        "[auth.redis]\nurl = \"redis://:unused-s3cret@127.0.0.1:6379\"\n\
         [auth.http]\nlogin_url = \"http://u:unused-s3cret2@h/login\"\n",
        &["unused-s3cret", "unused-s3cret2"],
        "url = \"redis://:<redacted>@127.0.0.1:6379\"",
    );
}

/// Without a secret the redacted text is the effective one, byte for byte; paths to files that
/// hold secrets are no secrets and are printed.
#[test]
fn without_secrets_nothing_changes() {
    for text in [
        "",
        "[http]\nbind = \"127.0.0.1:0\"\n",
        "[auth]\npassword_file = \"/etc/ringmq/passwd\"\nbackends = [\"file\", \"jwt\", \"redis\"]\n\
         [auth.jwt]\nhs256_secret_file = \"/etc/ringmq/jwt.secret\"\n\
         [auth.redis]\nurl = \"redis://127.0.0.1:6379/0\"\n",
        "[cluster]\nnode_id = \"n1\"\nnats = [\"nats://127.0.0.1:4222\"]\n",
    ] {
        let (effective, redacted) = printed(text);
        assert_eq!(redacted, effective, "{text}");
    }
    let (_, redacted) = printed("[auth.jwt]\nhs256_secret_file = \"/etc/ringmq/jwt.secret\"\n");
    assert!(redacted.contains("/etc/ringmq/jwt.secret"), "{redacted}");
}

/// The config errors about a URL show it without its credentials (they reach stderr).
#[test]
fn url_errors_hide_the_credentials() {
    for (text, key) in [
        (
            format!("{CLUSTER}nats = [\"nats://node:err-s3cret@127.0.0.1:notaport\"]\n"),
            "cluster.nats",
        ),
        (
            format!("{CLUSTER}nats = [\"ftp://err-s3cret@127.0.0.1:4222\"]\n"),
            "cluster.nats",
        ),
        (
            "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"ftp://u:err-s3cret@h/\"\n"
                .to_owned(),
            "auth.http.login_url",
        ),
        (
            "[auth]\nbackends = [\"http\"]\n[auth.http]\nlogin_url = \"http://h/login\"\n\
             acl_url = \"ftp://err-s3cret@h/\"\n"
                .to_owned(),
            "auth.http.acl_url",
        ),
        (
            "[auth]\nbackends = [\"redis\"]\n[auth.redis]\nurl = \"http://:err-s3cret@h:6379\"\n"
                .to_owned(),
            "auth.redis.url",
        ),
    ] {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("test", &text).unwrap());
        let error = raw.validate().unwrap_err().to_string();
        assert!(error.contains(key), "{text}: {error}");
        assert!(!error.contains("err-s3cret"), "{text}: {error}");
        assert!(error.contains(REDACTED), "{text}: {error}");
    }
}
