//! Sets up the backends `auth.backends` names, in order, and starts the workers when any is
//! external.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Gatekeeper;
use super::chain::{Chain, Link};
use crate::backend::SetupError;
use crate::backend::http::HttpBackend;
use crate::backend::jwt::{JwtBackend, JwtSettings};
use crate::backend::redis::RedisBackend;
use crate::settings::AuthSettings;
use crate::settings::{BackendKind, JwtConfig};

/// Why the backends could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BackendStartError {
    /// A backend refused its settings.
    #[error("auth backend `{backend}`: {source}")]
    Setup {
        /// Which backend.
        backend: &'static str,
        /// Why.
        #[source]
        source: SetupError,
    },
    /// A key file could not be read.
    #[error("auth.jwt: cannot read {}: {source}", path.display())]
    KeyFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The worker threads could not be started.
    #[error("starting the auth workers: {0}")]
    Workers(std::io::Error),
}

/// The gatekeeper for `auth`, or `None` when no external backend is configured.
pub fn start(auth: &AuthSettings, shards: usize) -> Result<Option<Gatekeeper>, BackendStartError> {
    let links = auth
        .backends
        .iter()
        .map(|kind| link(auth, *kind))
        .collect::<Result<Vec<_>, _>>()?;
    let chain = Chain::new(links);
    if !chain.has_external() {
        return Ok(None);
    }
    Gatekeeper::start(chain, &auth.gatekeeper, shards)
        .map(Some)
        .map_err(BackendStartError::Workers)
}

fn link(auth: &AuthSettings, kind: BackendKind) -> Result<Link, BackendStartError> {
    let setup = |backend: &'static str| move |source| BackendStartError::Setup { backend, source };
    let backend: Arc<dyn crate::backend::Backend> = match kind {
        BackendKind::File => return Ok(Link::File),
        BackendKind::Http => {
            let settings = auth.http.clone().ok_or(missing("http"))?;
            Arc::new(HttpBackend::new(settings).map_err(setup("http"))?)
        }
        BackendKind::Redis => {
            let settings = auth.redis.clone().ok_or(missing("redis"))?;
            Arc::new(RedisBackend::new(settings).map_err(setup("redis"))?)
        }
        BackendKind::Jwt => {
            let config = auth.jwt.as_ref().ok_or(missing("jwt"))?;
            Arc::new(JwtBackend::new(jwt_settings(config)?).map_err(setup("jwt"))?)
        }
    };
    Ok(Link::External(backend))
}

/// Config validation requires the table of every listed backend; this cannot happen.
fn missing(backend: &'static str) -> BackendStartError {
    BackendStartError::Setup {
        backend,
        source: SetupError::InvalidSetting {
            backend,
            setting: "table",
            reason: "missing",
        },
    }
}

fn jwt_settings(config: &JwtConfig) -> Result<JwtSettings, BackendStartError> {
    let read = |path: &Option<PathBuf>| path.as_deref().map(read_key).transpose();
    let secret = read(&config.hs256_secret_file)?.map(|mut bytes| {
        while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            bytes.pop();
        }
        bytes
    });
    Ok(JwtSettings {
        hs256_secret: secret,
        rs256_public_key_pem: read(&config.rs256_public_key_file)?,
        es256_public_key_pem: read(&config.es256_public_key_file)?,
        ..config.settings.clone()
    })
}

fn read_key(path: &Path) -> Result<Vec<u8>, BackendStartError> {
    std::fs::read(path).map_err(|source| BackendStartError::KeyFile {
        path: path.to_path_buf(),
        source,
    })
}
