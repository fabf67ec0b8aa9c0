//! The effective configuration as TOML: the overlaid raw layers, with the keys that validation
//! fills in for a table that leaves them out (a listener's `path`, a backend's timeouts)
//! written with the values in force, so the text is itself a complete config file that
//! validates to the same configuration ([`effective_toml`]); and the same with its secrets
//! replaced ([`redacted_toml`], what `ringmq --check-config` prints and the admin API shows).

use super::auth::RawAuth;
use super::listeners::{ListenerKind, RawListeners};
use super::raw::RawConfig;
use super::typed::Config;
use access::backend::SaltEncoding;
use access::backend::jwt::TokenSource;

/// The first lines of the printed configuration.
const HEADER: &str = "# The effective RingMQ configuration: the embedded defaults, overlaid with the\n\
                      # config file and the command-line flags. Usable as a config file as it is.\n\n";

/// `raw` (the layers `config` was validated from) as a TOML document with every key.
pub fn effective_toml(raw: &RawConfig, config: &Config) -> Result<String, toml::ser::Error> {
    Ok(format!(
        "{HEADER}{}",
        toml::to_string(&complete(raw, config))?
    ))
}

/// `raw` with the keys validation fills in written with the values in force.
fn complete(raw: &RawConfig, config: &Config) -> RawConfig {
    let mut complete = raw.clone();
    fill_listeners(&mut complete.listeners, config);
    fill_auth(&mut complete.auth, config);
    if let (Some(table), Some(cluster)) = (complete.cluster.as_mut(), &config.cluster) {
        table.max_outbound_messages = Some(cluster.max_outbound_messages as u64);
        table.subject_prefix = Some(cluster.subject_prefix.clone());
    }
    complete
}

/// What stands for a secret in [`redacted_toml`].
pub use broker_api::REDACTED;

/// [`HEADER`] when [`redacted_toml`] replaced a secret.
const REDACTED_HEADER: &str = "# The effective RingMQ configuration: the embedded defaults, overlaid with the\n\
                               # config file and the command-line flags. Usable as a config file once its\n\
                               # secrets, shown as \"<redacted>\", are put back.\n\n";

/// [`effective_toml`] with every secret replaced by [`REDACTED`] (what `--check-config` prints
/// and the admin API shows): the values of `http.token`, `http.password` and each bridge's
/// `password` and `local_password` whole, and the credentials in the userinfo of the URLs
/// (`cluster.nats`, `auth.redis.url`, `auth.http.login_url`, `auth.http.acl_url`) by
/// [`broker_api::redact_url`]. Paths to files that hold secrets (`auth.password_file`,
/// `auth.jwt.hs256_secret_file`, `cluster.creds_file`, TLS keys) are no secrets and are printed
/// as written, as are user names. With nothing to hide, the text is [`effective_toml`]'s; else
/// the header says that secrets are shown as [`REDACTED`].
pub fn redacted_toml(raw: &RawConfig, config: &Config) -> Result<String, toml::ser::Error> {
    let mut redacted = complete(raw, config);
    let hid = hide_secrets(&mut redacted);
    let header = if hid { REDACTED_HEADER } else { HEADER };
    Ok(format!("{header}{}", toml::to_string(&redacted)?))
}

/// Replaces every secret in `raw` (see [`redacted_toml`]); whether there was one.
fn hide_secrets(raw: &mut RawConfig) -> bool {
    let mut hid = false;
    let mut hide = |value: &mut Option<String>| {
        if value.as_deref().is_some_and(|v| !v.is_empty()) {
            *value = Some(REDACTED.to_owned());
            hid = true;
        }
    };
    hide(&mut raw.http.token);
    hide(&mut raw.http.password);
    for bridge in raw.bridges.iter_mut().flatten() {
        hide(&mut bridge.password);
        hide(&mut bridge.local_password);
    }
    let auth = &mut raw.auth;
    let urls = raw
        .cluster
        .iter_mut()
        .flat_map(|c| c.nats.iter_mut().flatten())
        .chain(auth.redis.iter_mut().flat_map(|r| r.url.as_mut()))
        .chain(auth.http.iter_mut().flat_map(|http| {
            [http.login_url.as_mut(), http.acl_url.as_mut()]
                .into_iter()
                .flatten()
        }));
    for url in urls {
        let shown = broker_api::redact_url(url).into_owned();
        if shown != *url {
            *url = shown;
            hid = true;
        }
    }
    hid
}

/// The listener keys with defaults (`path`, the client-certificate switches), from `config`.
fn fill_listeners(raw: &mut RawListeners, config: &Config) {
    let listeners = || config.listeners.transports.iter();
    let tls = listeners().filter_map(|t| match &t.kind {
        ListenerKind::Tls(tls) => Some((tls, t.proxy_protocol)),
        _ => None,
    });
    for (table, (tls, proxy)) in raw.tls.iter_mut().flatten().zip(tls) {
        table.proxy_protocol = Some(proxy);
        table.require_client_cert = Some(tls.require_client_cert);
        table.identity_as_username = Some(tls.identity_as_username);
    }
    let ws = listeners().filter_map(|t| match &t.kind {
        ListenerKind::Ws { path, origins } => Some((path, origins, t.proxy_protocol)),
        _ => None,
    });
    for (table, (path, origins, proxy)) in raw.ws.iter_mut().flatten().zip(ws) {
        table.proxy_protocol = Some(proxy);
        table.path = Some(path.clone());
        table.allowed_origins = Some(origins.listed().to_vec());
    }
    let wss = listeners().filter_map(|t| match &t.kind {
        ListenerKind::Wss { path, origins, tls } => Some((path, origins, tls, t.proxy_protocol)),
        _ => None,
    });
    for (table, (path, origins, tls, proxy)) in raw.wss.iter_mut().flatten().zip(wss) {
        table.proxy_protocol = Some(proxy);
        table.path = Some(path.clone());
        table.allowed_origins = Some(origins.listed().to_vec());
        table.require_client_cert = Some(tls.require_client_cert);
        table.identity_as_username = Some(tls.identity_as_username);
    }
    let trusted = config.listeners.proxy_trusted.blocks().iter();
    raw.proxy_trusted = Some(trusted.map(ToString::to_string).collect());
}

/// The keys of `[auth]` and its backends' tables that have defaults, from `config` (a table
/// whose backend is not listed in `auth.backends` is printed as written: it is not used).
fn fill_auth(raw: &mut RawAuth, config: &Config) {
    let auth = &config.auth;
    let gatekeeper = &auth.gatekeeper;
    raw.allow_anonymous = Some(auth.allow_anonymous);
    raw.client_id_owner_check = Some(auth.client_id_owner_check);
    raw.use_username_as_clientid = Some(auth.use_username_as_clientid);
    raw.workers = Some(gatekeeper.workers as u64);
    raw.max_pending = Some(gatekeeper.max_pending as u64);
    raw.cache_entries = Some(gatekeeper.cache_entries as u64);
    raw.cache_ttl = Some(gatekeeper.cache_ttl.as_secs());
    if let (Some(table), Some(http)) = (raw.http.as_mut(), &auth.http) {
        table.timeout_ms = Some(millis(http.timeout));
        table.max_concurrent = Some(http.max_concurrent as u64);
    }
    if let (Some(table), Some(redis)) = (raw.redis.as_mut(), &auth.redis) {
        table.url = Some(redis.url.clone());
        table.timeout_ms = Some(millis(redis.timeout));
        table.salt_encoding = Some(salt_name(redis.salt_encoding).to_owned());
    }
    if let (Some(table), Some(jwt)) = (raw.jwt.as_mut(), &auth.jwt) {
        let settings = &jwt.settings;
        table.from = Some(token_source_name(settings.token_from).to_owned());
        table.publish_claim = Some(settings.publish_claim.clone());
        table.subscribe_claim = Some(settings.subscribe_claim.clone());
        table.leeway_s = Some(settings.leeway.as_secs());
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn salt_name(encoding: SaltEncoding) -> &'static str {
    match encoding {
        SaltEncoding::Base64 => "base64",
        SaltEncoding::Utf8 => "utf8",
    }
}

fn token_source_name(source: TokenSource) -> &'static str {
    match source {
        TokenSource::Password => "password",
        TokenSource::Username => "username",
    }
}

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod secrets_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{default_raw, parse_raw};

    /// The defaults overlaid with `text`, validated, and printed.
    fn printed(text: &str) -> (Config, String) {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("t", text).unwrap());
        let config = raw.validate().unwrap();
        let toml = effective_toml(&raw, &config).unwrap();
        (config, toml)
    }

    /// The printed text, read back on its own (no defaults under it), validates to the same
    /// configuration and prints the same text again.
    fn assert_round_trip(text: &str) -> String {
        let (config, toml) = printed(text);
        let again = parse_raw("printed", &toml).unwrap();
        let reread = again.validate().unwrap();
        assert_eq!(format!("{reread:?}"), format!("{config:?}"), "{toml}");
        assert_eq!(effective_toml(&again, &reread).unwrap(), toml);
        toml
    }

    #[test]
    fn defaults_round_trip_with_every_section() {
        let toml = assert_round_trip("");
        for section in [
            "[listeners]",
            "[runtime]",
            "[log]",
            "[connection]",
            "[limits]",
            "[routing]",
            "[queues]",
            "[sessions]",
            "[retained]",
            "[delayed]",
            "[sys]",
            "[persistence]",
            "[auth]",
            "[ip]",
            "[overload]",
        ] {
            assert!(toml.contains(section), "{section} missing:\n{toml}");
        }
        assert!(toml.contains("max_packet_size = 1048576"), "{toml}");
    }

    #[test]
    fn listener_tables_and_backend_tables_are_complete() {
        let toml = assert_round_trip(
            r#"
            [listeners]
            tcp = ["127.0.0.1:1884"]
            [[listeners.tls]]
            bind = "127.0.0.1:8883"
            cert = "server.pem"
            key = "server.key"
            [[listeners.ws]]
            bind = "127.0.0.1:8080"
            [[listeners.wss]]
            bind = "127.0.0.1:8443"
            cert = "server.pem"
            key = "server.key"
            [auth]
            backends = ["http", "jwt"]
            [auth.http]
            login_url = "http://127.0.0.1:9/login"
            [auth.jwt]
            hs256_secret_file = "jwt.secret"
            "#,
        );
        assert!(toml.contains("[[listeners.tls]]"), "{toml}");
        assert!(toml.contains("[[listeners.wss]]"), "{toml}");
        assert!(toml.contains("path = \"/mqtt\""), "{toml}");
        assert!(toml.contains("[auth.http]"), "{toml}");
        assert!(toml.contains("timeout_ms = 2000"), "{toml}");
        assert!(toml.contains("publish_claim = \"publish\""), "{toml}");
        assert!(toml.contains("tcp = [\"127.0.0.1:1884\"]"), "{toml}");
    }

    #[test]
    fn values_are_the_overlaid_ones() {
        let toml = assert_round_trip("[limits]\nreceive_maximum = 10\n[log]\nformat = \"json\"\n");
        assert!(toml.contains("receive_maximum = 10\n"), "{toml}");
        assert!(toml.contains("format = \"json\""), "{toml}");
    }
}
