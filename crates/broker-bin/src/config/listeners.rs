//! `[listeners]`: plain TCP addresses (direct, and behind a balancer that sends a PROXY
//! protocol header: `proxy_tcp`) plus `[[listeners.tls]]`, `[[listeners.ws]]` and
//! `[[listeners.wss]]` tables (each with `proxy_protocol`), the balancers trusted to send
//! that header (`proxy_trusted`), and `[[listeners.quic]]` (MQTT over QUIC, UDP); raw and
//! validated (into the `transport` crate's typed settings, re-exported here).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use transport::{
    AllowedOrigins, Cidr, ListenerKind, ListenerSettings, ProxyTrust, QuicListener, TlsSettings,
    TransportListener,
};

use super::error::ConfigError;
use super::fields::parse_listen_addr;
use super::overlay::raw_section;

raw_section!(
    /// `[listeners]`
    RawListeners {
        tcp: Vec<String>,
        proxy_tcp: Vec<String>,
        proxy_trusted: Vec<String>,
        tls: Vec<RawTlsListener>,
        ws: Vec<RawWsListener>,
        wss: Vec<RawWssListener>,
        quic: Vec<RawQuicListener>,
    }
);

/// `[[listeners.quic]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuicListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_as_username: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crl_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections_per_shard: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumption_tickets: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_rtt: Option<bool>,
}

/// `[[listeners.tls]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTlsListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_as_username: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crl_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ocsp_response_file: Option<String>,
}

/// `[[listeners.ws]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWsListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_origins: Option<Vec<String>>,
}

/// `[[listeners.wss]]` as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawWssListener {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_origins: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity_as_username: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crl_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ocsp_response_file: Option<String>,
}

impl RawListeners {
    /// Validates every listener; at least one of any kind is required.
    pub(super) fn validate(&self) -> Result<ListenerSettings, ConfigError> {
        let tcp = addresses("listeners.tcp", &self.tcp)?;
        let proxy_tcp = addresses("listeners.proxy_tcp", &self.proxy_tcp)?;
        let mut transports = Vec::new();
        for raw in self.tls.iter().flatten() {
            let kind = ListenerKind::Tls(tls_settings("listeners.tls", raw.into())?);
            let bind = ("listeners.tls.bind", &raw.bind);
            transports.push(listener(bind, kind, raw.proxy_protocol)?);
        }
        for raw in self.ws.iter().flatten() {
            let path = ws_path("listeners.ws.path", &raw.path)?;
            let origins = allowed_origins("listeners.ws.allowed_origins", &raw.allowed_origins)?;
            let kind = ListenerKind::Ws { path, origins };
            let bind = ("listeners.ws.bind", &raw.bind);
            transports.push(listener(bind, kind, raw.proxy_protocol)?);
        }
        for raw in self.wss.iter().flatten() {
            let path = ws_path("listeners.wss.path", &raw.path)?;
            let origins = allowed_origins("listeners.wss.allowed_origins", &raw.allowed_origins)?;
            let tls = tls_settings("listeners.wss", raw.into())?;
            let kind = ListenerKind::Wss { path, origins, tls };
            let bind = ("listeners.wss.bind", &raw.bind);
            transports.push(listener(bind, kind, raw.proxy_protocol)?);
        }
        let quic = self
            .quic
            .iter()
            .flatten()
            .map(quic_listener)
            .collect::<Result<Vec<_>, _>>()?;
        if tcp.is_empty() && proxy_tcp.is_empty() && transports.is_empty() && quic.is_empty() {
            return Err(ConfigError::invalid(
                "listeners.tcp",
                "at least one listener (tcp, proxy_tcp, tls, ws, wss or quic) is required",
            ));
        }
        let settings = ListenerSettings {
            tcp,
            proxy_tcp,
            transports,
            quic,
            proxy_trusted: proxy_trusted(&self.proxy_trusted)?,
        };
        reject_duplicate_binds(&settings.binds())?;
        let quic_binds: Vec<SocketAddr> = settings.quic.iter().map(|q| q.bind).collect();
        reject_duplicate_binds(&quic_binds)?;
        Ok(settings)
    }
}

/// The TLS keys shared by `tls` and `wss` tables.
struct RawTlsKeys<'a> {
    cert: &'a Option<String>,
    key: &'a Option<String>,
    client_ca: &'a Option<String>,
    require_client_cert: Option<bool>,
    identity_as_username: Option<bool>,
    crl_file: &'a Option<String>,
    ocsp_response_file: &'a Option<String>,
}

impl<'a> From<&'a RawTlsListener> for RawTlsKeys<'a> {
    fn from(raw: &'a RawTlsListener) -> Self {
        Self {
            cert: &raw.cert,
            key: &raw.key,
            client_ca: &raw.client_ca,
            require_client_cert: raw.require_client_cert,
            identity_as_username: raw.identity_as_username,
            crl_file: &raw.crl_file,
            ocsp_response_file: &raw.ocsp_response_file,
        }
    }
}

impl<'a> From<&'a RawWssListener> for RawTlsKeys<'a> {
    fn from(raw: &'a RawWssListener) -> Self {
        Self {
            cert: &raw.cert,
            key: &raw.key,
            client_ca: &raw.client_ca,
            require_client_cert: raw.require_client_cert,
            identity_as_username: raw.identity_as_username,
            crl_file: &raw.crl_file,
            ocsp_response_file: &raw.ocsp_response_file,
        }
    }
}

fn tls_settings(table: &'static str, raw: RawTlsKeys<'_>) -> Result<TlsSettings, ConfigError> {
    let path = |value: &Option<String>, name: &str| -> Result<PathBuf, ConfigError> {
        match value.as_deref() {
            Some(text) if !text.is_empty() => Ok(PathBuf::from(text)),
            _ => Err(ConfigError::invalid(
                table,
                format!("`{name}` (a PEM file) is required"),
            )),
        }
    };
    let settings = TlsSettings {
        cert: path(raw.cert, "cert")?,
        key: path(raw.key, "key")?,
        client_ca: optional_path(raw.client_ca),
        require_client_cert: raw.require_client_cert.unwrap_or(false),
        identity_as_username: raw.identity_as_username.unwrap_or(false),
        crl: optional_path(raw.crl_file),
        ocsp_response: optional_path(raw.ocsp_response_file),
    };
    if settings.crl.is_some() && settings.client_ca.is_none() {
        return Err(ConfigError::invalid(
            table,
            "`crl_file` needs `client_ca` (the lists revoke client certificates)",
        ));
    }
    if settings.client_ca.is_none()
        && (settings.require_client_cert || settings.identity_as_username)
    {
        return Err(ConfigError::invalid(
            table,
            "`require_client_cert` and `identity_as_username` need `client_ca` (the CA that \
             signs client certificates)",
        ));
    }
    Ok(settings)
}

/// Resumption tickets (at most 1,000,000; 0: no resumption) and 0-RTT (which needs them).
fn resumption(
    raw: &RawQuicListener,
    settings: &mut transport::quic::QuicSettings,
) -> Result<(), ConfigError> {
    if let Some(tickets) = raw.resumption_tickets {
        if tickets > 1_000_000 {
            return Err(ConfigError::invalid(
                "listeners.quic.resumption_tickets",
                format!("{tickets}: expected 0 to 1000000"),
            ));
        }
        settings.resumption_tickets = tickets;
    }
    if let Some(zero_rtt) = raw.zero_rtt {
        if zero_rtt && settings.resumption_tickets == 0 {
            return Err(ConfigError::invalid(
                "listeners.quic.zero_rtt",
                "0-RTT needs resumption: resumption_tickets is 0",
            ));
        }
        settings.zero_rtt = zero_rtt;
    }
    if settings.resumption_tickets == 0 {
        settings.zero_rtt = false;
    }
    Ok(())
}

/// A `[[listeners.quic]]` table: its TLS keys as a TLS listener's (but `ocsp_response_file`),
/// the idle timeout (1 s to 10 min) and the connections one shard holds.
fn quic_listener(raw: &RawQuicListener) -> Result<QuicListener, ConfigError> {
    const TABLE: &str = "listeners.quic";
    let tls = tls_settings(
        TABLE,
        RawTlsKeys {
            cert: &raw.cert,
            key: &raw.key,
            client_ca: &raw.client_ca,
            require_client_cert: raw.require_client_cert,
            identity_as_username: raw.identity_as_username,
            crl_file: &raw.crl_file,
            ocsp_response_file: &None,
        },
    )?;
    let mut settings = transport::quic::QuicSettings::new(tls);
    if let Some(ms) = raw.idle_timeout_ms {
        if !(1_000..=600_000).contains(&ms) {
            return Err(ConfigError::invalid(
                "listeners.quic.idle_timeout_ms",
                format!("{ms}: expected 1000 to 600000"),
            ));
        }
        settings.idle_timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(max) = raw.max_connections_per_shard {
        if max == 0 {
            return Err(ConfigError::invalid(
                "listeners.quic.max_connections_per_shard",
                "0: at least 1",
            ));
        }
        settings.max_connections_per_shard = max;
    }
    resumption(raw, &mut settings)?;
    let bind = bind_addr(("listeners.quic.bind", &raw.bind))?;
    Ok(QuicListener { bind, settings })
}

/// A path key's value, `None` when missing or empty.
fn optional_path(value: &Option<String>) -> Option<PathBuf> {
    value
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// A WebSocket listener's `allowed_origins`: each `http://` or `https://` with a host and an
/// optional port, nothing after (what browsers send in `Origin`).
fn allowed_origins(
    key: &'static str,
    origins: &Option<Vec<String>>,
) -> Result<AllowedOrigins, ConfigError> {
    let origins = origins.clone().unwrap_or_default();
    for origin in &origins {
        let host = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"));
        let valid = host.is_some_and(|host| {
            !host.is_empty() && !host.contains(['/', '?', '#', ' ']) && !host.ends_with(':')
        });
        if !valid {
            return Err(ConfigError::invalid(
                key,
                format!(
                    "{origin:?} is not an origin (scheme://host or scheme://host:port, \
                     scheme http or https, no path)"
                ),
            ));
        }
    }
    Ok(AllowedOrigins::new(origins))
}

fn ws_path(key: &'static str, path: &Option<String>) -> Result<String, ConfigError> {
    let path = path.clone().unwrap_or_else(|| "/mqtt".to_owned());
    if !path.starts_with('/') || path.contains(char::is_whitespace) {
        return Err(ConfigError::invalid(
            key,
            format!("{path:?} is not a URL path (it starts with `/`, without spaces)"),
        ));
    }
    Ok(path)
}

/// A table's listener: `bind` is (its key, its value).
fn listener(
    (key, bind): (&'static str, &Option<String>),
    kind: ListenerKind,
    proxy_protocol: Option<bool>,
) -> Result<TransportListener, ConfigError> {
    Ok(TransportListener {
        bind: bind_addr((key, bind))?,
        kind,
        proxy_protocol: proxy_protocol.unwrap_or(false),
    })
}

/// A table's `bind`: (its key, its value), required.
fn bind_addr((key, bind): (&'static str, &Option<String>)) -> Result<SocketAddr, ConfigError> {
    let text = bind
        .as_deref()
        .ok_or_else(|| ConfigError::invalid(key, "missing (HOST:PORT to listen on)"))?;
    parse_listen_addr(key, text)
}

/// A list of `HOST:PORT` addresses under `key`.
fn addresses(
    key: &'static str,
    texts: &Option<Vec<String>>,
) -> Result<Vec<SocketAddr>, ConfigError> {
    texts
        .iter()
        .flatten()
        .map(|text| parse_listen_addr(key, text))
        .collect()
}

/// `listeners.proxy_trusted`: address blocks; loopback only when not set.
fn proxy_trusted(texts: &Option<Vec<String>>) -> Result<ProxyTrust, ConfigError> {
    let Some(texts) = texts else {
        return Ok(ProxyTrust::loopback());
    };
    let blocks = texts
        .iter()
        .map(|text| text.parse::<Cidr>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ConfigError::invalid("listeners.proxy_trusted", error.to_string()))?;
    Ok(ProxyTrust::new(blocks))
}

/// Two listeners on one address would share its connections at random.
fn reject_duplicate_binds(binds: &[SocketAddr]) -> Result<(), ConfigError> {
    for (index, addr) in binds.iter().enumerate() {
        if addr.port() != 0 && binds[..index].contains(addr) {
            return Err(ConfigError::invalid(
                "listeners",
                format!("{addr} is configured for two listeners"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{default_raw, parse_raw};
    use super::*;

    fn listeners(text: &str) -> Result<ListenerSettings, String> {
        let mut raw = default_raw().unwrap();
        raw.overlay(parse_raw("t", text).map_err(|e| e.to_string())?);
        let config = raw.validate().map_err(|e| e.to_string())?;
        Ok(config.listeners.clone())
    }

    #[test]
    fn proxy_protocol_keys_default_off_and_loopback_and_name_bad_values() {
        let defaults = listeners("").unwrap();
        assert!(!defaults.any_proxy());
        assert_eq!(defaults.proxy_trusted, ProxyTrust::loopback());
        let set = listeners(
            "[listeners]\nproxy_tcp = [\"127.0.0.1:1884\"]\nproxy_trusted = [\"10.0.0.0/8\"]\n\
             [[listeners.ws]]\nbind = \"127.0.0.1:8080\"\nproxy_protocol = true\n",
        )
        .unwrap();
        assert_eq!(set.proxy_tcp, ["127.0.0.1:1884".parse().unwrap()]);
        assert!(set.transports[0].proxy_protocol);
        assert!(set.proxy_trusted.trusts("10.1.2.3".parse().unwrap()));
        assert!(!set.proxy_trusted.trusts("127.0.0.1".parse().unwrap()));
        for (text, key) in [
            (
                "[listeners]\nproxy_trusted = [\"10.0.0.0/33\"]\n",
                "listeners.proxy_trusted",
            ),
            (
                "[listeners]\nproxy_tcp = [\"nowhere\"]\n",
                "listeners.proxy_tcp",
            ),
            (
                "[[listeners.tls]]\nbind = \"127.0.0.1:8883\"\nproxy_protocol = 1\n",
                "proxy_protocol",
            ),
        ] {
            let error = listeners(text).unwrap_err();
            assert!(error.contains(key), "{error}");
        }
    }

    #[test]
    fn quic_listeners_take_tls_keys_and_bounds_and_name_bad_values() {
        let quic = |extra: &str| {
            listeners(&format!(
                "[[listeners.quic]]\nbind = \"127.0.0.1:14567\"\ncert = \"c.pem\"\nkey = \"k.pem\"\n{extra}"
            ))
        };
        let set = quic("idle_timeout_ms = 5000\nmax_connections_per_shard = 7\n").unwrap();
        let listener = &set.quic[0];
        assert_eq!(listener.bind, "127.0.0.1:14567".parse().unwrap());
        assert_eq!(
            listener.settings.idle_timeout,
            std::time::Duration::from_secs(5)
        );
        assert_eq!(listener.settings.max_connections_per_shard, 7);
        assert_eq!(listener.settings.tls.cert, PathBuf::from("c.pem"));
        let defaults = quic("").unwrap();
        assert_eq!(
            defaults.quic[0].settings.idle_timeout,
            std::time::Duration::from_secs(60)
        );
        assert!(defaults.quic[0].settings.zero_rtt);
        let no_resumption = quic("resumption_tickets = 0\n").unwrap();
        assert!(!no_resumption.quic[0].settings.zero_rtt);
        for (extra, key) in [
            ("idle_timeout_ms = 10\n", "listeners.quic.idle_timeout_ms"),
            (
                "resumption_tickets = 2000000\n",
                "listeners.quic.resumption_tickets",
            ),
            (
                "resumption_tickets = 0\nzero_rtt = true\n",
                "listeners.quic.zero_rtt",
            ),
            (
                "max_connections_per_shard = 0\n",
                "listeners.quic.max_connections_per_shard",
            ),
            ("require_client_cert = true\n", "listeners.quic"),
            ("identity_as_username = true\n", "need `client_ca`"),
            ("ocsp_response_file = \"o\"\n", "ocsp_response_file"),
        ] {
            let error = quic(extra).unwrap_err().to_string();
            assert!(error.contains(key), "{extra}: {error}");
        }
        let missing = listeners("[[listeners.quic]]\nbind = \"127.0.0.1:1\"\n").unwrap_err();
        assert!(missing.to_string().contains("`cert`"), "{missing}");
        // A UDP address may equal a TCP listener's; two QUIC listeners may not share one.
        let beside_tcp = "[listeners]\ntcp = [\"127.0.0.1:14567\"]\n";
        assert!(listeners(&format!("{beside_tcp}[[listeners.quic]]\nbind = \"127.0.0.1:14567\"\ncert = \"c\"\nkey = \"k\"\n")).is_ok());
        let twice =
            quic("[[listeners.quic]]\nbind = \"127.0.0.1:14567\"\ncert = \"c\"\nkey = \"k\"\n");
        assert!(twice.unwrap_err().to_string().contains("two listeners"));
    }

    #[test]
    fn allowed_origins_are_scheme_and_host_only() {
        let key = "listeners.ws.allowed_origins";
        let check = |origins: &[&str]| {
            allowed_origins(
                key,
                &Some(origins.iter().map(|o| (*o).to_owned()).collect()),
            )
        };
        assert!(check(&["https://a.example", "http://127.0.0.1:8080"]).is_ok());
        for bad in [
            "a.example",
            "https://",
            "https://a.example/",
            "ftp://a",
            "http://a:",
        ] {
            let error = check(&[bad]).unwrap_err().to_string();
            assert!(
                error.contains(key) && error.contains("not an origin"),
                "{error}"
            );
        }
    }
}
