//! `[auth]`'s external backends: the `backends` list and the `[auth.http]`, `[auth.redis]` and
//! `[auth.jwt]` tables, raw and validated. Keys a table leaves out take the defaults below
//! (documented in `configs/default.toml`).

use std::path::PathBuf;
use std::time::Duration;

use broker_api::redact_url;

use super::error::ConfigError;
use super::fields::ranged;
use super::overlay::raw_section;
use access::backend::SaltEncoding;
use access::backend::http::{HttpExchange, HttpSettings};
use access::backend::jwt::{JwtSettings, TokenSource};
use access::backend::redis::RedisSettings;
use access::scram::Mechanism;
use access::settings::{BackendKind, JwtConfig, ScramSettings, ScramStore};

raw_section!(
    /// `[auth.http]`
    RawAuthHttp {
        login_url: String,
        acl_url: String,
        auth_exchange_url: String,
        auth_methods: Vec<String>,
        timeout_ms: u64,
        max_concurrent: u64,
    }
);
raw_section!(
    /// `[auth.redis]`
    RawAuthRedis {
        url: String,
        timeout_ms: u64,
        salt_encoding: String,
    }
);
raw_section!(
    /// `[auth.jwt]`
    RawAuthJwt {
        from: String,
        hs256_secret_file: String,
        rs256_public_key_file: String,
        es256_public_key_file: String,
        issuer: String,
        audience: String,
        username_claim: String,
        publish_claim: String,
        subscribe_claim: String,
        leeway_s: u64,
    }
);

raw_section!(
    /// `[auth.scram]`
    RawAuthScram {
        store: String,
        file: String,
        mechanisms: Vec<String>,
    }
);

const DEFAULT_TIMEOUT_MS: u64 = 2_000;
const DEFAULT_HTTP_CONCURRENCY: u64 = 16;

fn text(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// `auth.backends`: `file` when not set.
pub(super) fn backend_kinds(
    backends: &Option<Vec<String>>,
) -> Result<Vec<BackendKind>, ConfigError> {
    let names = backends.clone().unwrap_or_else(|| vec!["file".into()]);
    let mut kinds = Vec::new();
    for name in &names {
        let kind = match name.as_str() {
            "file" => BackendKind::File,
            "http" => BackendKind::Http,
            "redis" => BackendKind::Redis,
            "jwt" => BackendKind::Jwt,
            other => {
                return Err(ConfigError::invalid(
                    "auth.backends",
                    format!("unknown backend `{other}` (expected file, http, redis or jwt)"),
                ));
            }
        };
        if kinds.contains(&kind) {
            return Err(ConfigError::invalid(
                "auth.backends",
                format!("`{name}` is listed twice"),
            ));
        }
        kinds.push(kind);
    }
    Ok(kinds)
}

/// The table for `kind`, required when `backends` names it.
fn table<'a, T: Default>(
    backends: &[BackendKind],
    kind: BackendKind,
    key: &'static str,
    table: &'a Option<T>,
) -> Result<Option<&'a T>, ConfigError> {
    if !backends.contains(&kind) {
        return Ok(None);
    }
    table.as_ref().map(Some).ok_or_else(|| {
        ConfigError::invalid(
            key,
            "the backend is listed in auth.backends but its table is missing",
        )
    })
}

/// `[auth.http]`, when `backends` names it.
pub(super) fn http_settings(
    backends: &[BackendKind],
    http: &Option<RawAuthHttp>,
) -> Result<Option<HttpSettings>, ConfigError> {
    let Some(http) = table(backends, BackendKind::Http, "auth.http", http)? else {
        return Ok(None);
    };
    let url = |key: &'static str, value: &Option<String>| match text(value) {
        Some(url) if url.starts_with("http://") || url.starts_with("https://") => Ok(Some(url)),
        Some(url) => Err(ConfigError::invalid(
            key,
            format!("`{}` is not an http:// or https:// URL", redact_url(&url)),
        )),
        None => Ok(None),
    };
    let login_url = url("auth.http.login_url", &http.login_url)?
        .ok_or_else(|| ConfigError::invalid("auth.http.login_url", "missing"))?;
    Ok(Some(HttpSettings {
        login_url,
        acl_url: url("auth.http.acl_url", &http.acl_url)?,
        timeout: Duration::from_millis(ranged(
            "auth.http.timeout_ms",
            http.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            1,
            600_000,
        )?),
        max_concurrent: ranged(
            "auth.http.max_concurrent",
            http.max_concurrent.unwrap_or(DEFAULT_HTTP_CONCURRENCY),
            1,
            4_096,
        )? as usize,
        exchange: http_exchange(
            url("auth.http.auth_exchange_url", &http.auth_exchange_url)?,
            http,
        )?,
    }))
}

/// `auth_exchange_url` with `auth_methods`: both or neither.
fn http_exchange(
    url: Option<String>,
    http: &RawAuthHttp,
) -> Result<Option<HttpExchange>, ConfigError> {
    let methods = http.auth_methods.clone().unwrap_or_default();
    match (url, methods.is_empty()) {
        (None, true) => Ok(None),
        (Some(url), false) => Ok(Some(HttpExchange { url, methods })),
        (None, false) => Err(ConfigError::invalid(
            "auth.http.auth_exchange_url",
            "auth.http.auth_methods is set: name the URL their AUTH rounds are POSTed to",
        )),
        (Some(_), true) => Err(ConfigError::invalid(
            "auth.http.auth_methods",
            "auth.http.auth_exchange_url is set: name the Authentication Methods it drives",
        )),
    }
}

/// `[auth.redis]`, when `backends` names it.
pub(super) fn redis_settings(
    backends: &[BackendKind],
    redis: &Option<RawAuthRedis>,
) -> Result<Option<RedisSettings>, ConfigError> {
    let Some(redis) = table(backends, BackendKind::Redis, "auth.redis", redis)? else {
        return Ok(None);
    };
    let url = text(&redis.url).unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    if !url.starts_with("redis://") {
        return Err(ConfigError::invalid(
            "auth.redis.url",
            format!("`{}` is not a redis:// URL", redact_url(&url)),
        ));
    }
    let salt_encoding = match redis.salt_encoding.as_deref().unwrap_or("base64") {
        "base64" => SaltEncoding::Base64,
        "utf8" => SaltEncoding::Utf8,
        other => {
            return Err(ConfigError::invalid(
                "auth.redis.salt_encoding",
                format!("`{other}` (expected base64 or utf8)"),
            ));
        }
    };
    Ok(Some(RedisSettings {
        url,
        salt_encoding,
        timeout: Duration::from_millis(ranged(
            "auth.redis.timeout_ms",
            redis.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            1,
            600_000,
        )?),
    }))
}

/// `[auth.jwt]`, when `backends` names it.
pub(super) fn jwt_config(
    backends: &[BackendKind],
    jwt: &Option<RawAuthJwt>,
) -> Result<Option<JwtConfig>, ConfigError> {
    let Some(jwt) = table(backends, BackendKind::Jwt, "auth.jwt", jwt)? else {
        return Ok(None);
    };
    jwt_table(jwt).map(Some)
}

fn jwt_table(jwt: &RawAuthJwt) -> Result<JwtConfig, ConfigError> {
    let token_from = match jwt.from.as_deref().unwrap_or("password") {
        "password" => TokenSource::Password,
        "username" => TokenSource::Username,
        other => {
            return Err(ConfigError::invalid(
                "auth.jwt.from",
                format!("`{other}` (expected password or username)"),
            ));
        }
    };
    let path = |value: &Option<String>| text(value).map(PathBuf::from);
    let settings = JwtSettings {
        token_from,
        issuer: text(&jwt.issuer),
        audience: text(&jwt.audience),
        username_claim: text(&jwt.username_claim),
        publish_claim: text(&jwt.publish_claim).unwrap_or_else(|| "publish".into()),
        subscribe_claim: text(&jwt.subscribe_claim).unwrap_or_else(|| "subscribe".into()),
        leeway: Duration::from_secs(ranged(
            "auth.jwt.leeway_s",
            jwt.leeway_s.unwrap_or(0),
            0,
            3_600,
        )?),
        ..JwtSettings::default()
    };
    let config = JwtConfig {
        settings,
        hs256_secret_file: path(&jwt.hs256_secret_file),
        rs256_public_key_file: path(&jwt.rs256_public_key_file),
        es256_public_key_file: path(&jwt.es256_public_key_file),
    };
    let keys = [
        &config.hs256_secret_file,
        &config.rs256_public_key_file,
        &config.es256_public_key_file,
    ];
    if keys.iter().all(|k| k.is_none()) {
        return Err(ConfigError::invalid(
            "auth.jwt",
            "no key: set hs256_secret_file, rs256_public_key_file or es256_public_key_file",
        ));
    }
    Ok(config)
}

/// `[auth.scram]`: `store` "file" (the default, `file` required) or "redis" (`redis` among
/// the backends); `mechanisms` defaults to both SCRAM mechanisms.
pub(super) fn scram_settings(
    backends: &[BackendKind],
    raw: &Option<RawAuthScram>,
) -> Result<Option<ScramSettings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let store = match (raw.store.as_deref().unwrap_or("file"), text(&raw.file)) {
        ("file", Some(file)) => ScramStore::File(PathBuf::from(file)),
        ("file", None) => {
            return Err(ConfigError::invalid(
                "auth.scram.file",
                "[auth.scram] needs the credential file (written by `ringmq scram add`)",
            ));
        }
        ("redis", _) if backends.contains(&BackendKind::Redis) => ScramStore::Redis,
        ("redis", _) => {
            return Err(ConfigError::invalid(
                "auth.scram.store",
                "\"redis\" needs `redis` among auth.backends and its [auth.redis] table",
            ));
        }
        (other, _) => {
            return Err(ConfigError::invalid(
                "auth.scram.store",
                format!("unknown store `{other}` (expected file or redis)"),
            ));
        }
    };
    let names = raw
        .mechanisms
        .clone()
        .unwrap_or_else(|| Mechanism::ALL.iter().map(|m| m.name().to_owned()).collect());
    let mut mechanisms = Vec::new();
    for name in &names {
        let mechanism = Mechanism::from_name(name).ok_or_else(|| {
            ConfigError::invalid(
                "auth.scram.mechanisms",
                format!("unknown mechanism `{name}` (expected SCRAM-SHA-256 or SCRAM-SHA-512)"),
            )
        })?;
        mechanisms.push(mechanism);
    }
    if mechanisms.is_empty() {
        return Err(ConfigError::invalid(
            "auth.scram.mechanisms",
            "name at least one mechanism, or remove [auth.scram]",
        ));
    }
    Ok(Some(ScramSettings { store, mechanisms }))
}

#[cfg(test)]
#[path = "auth_scram_tests.rs"]
mod auth_scram_tests;
