//! TLS settings turned into a rustls `ServerConfig` (ring provider: pure Rust plus assembly
//! that cross-compiles, so the static aarch64 build links), swapped on reload.

use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::UnbufferedServerConnection;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};

use crate::client_cert::ExplainedRefusals;
use crate::config::TlsSettings;
use crate::error::TransportError;

/// A TLS listener's settings and the server config built from them; new handshakes use the
/// config of the last successful load.
pub(crate) struct TlsSource {
    settings: TlsSettings,
    /// Replaced whole on reload; sessions already accepted keep the version they took.
    current: RwLock<Arc<ServerConfig>>,
}

impl TlsSource {
    /// Loads the certificate, key and client CA named in `settings`.
    pub(crate) fn load(settings: TlsSettings) -> Result<Self, TransportError> {
        let config = server_config(&settings)?;
        Ok(Self {
            settings,
            current: RwLock::new(Arc::new(config)),
        })
    }

    /// Reads the files again; on failure the old config stays in force.
    pub(crate) fn reload(&self) -> Result<(), TransportError> {
        let config = server_config(&self.settings)?;
        // A poisoned lock still holds a whole config: only this assignment writes, and it
        // cannot panic while holding the lock.
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }

    /// A server-side session for one accepted connection.
    pub(crate) fn accept(&self) -> Result<UnbufferedServerConnection, rustls::Error> {
        let config = Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()));
        UnbufferedServerConnection::new(config)
    }

    pub(crate) fn settings(&self) -> &TlsSettings {
        &self.settings
    }
}

/// A server config for a certificate chain and key without client authentication (the
/// operations HTTP listener's HTTPS); an error names the file.
pub fn load_server_config(cert: &Path, key: &Path) -> Result<ServerConfig, TransportError> {
    server_config(&TlsSettings {
        cert: cert.to_owned(),
        key: key.to_owned(),
        client_ca: None,
        require_client_cert: false,
        identity_as_username: false,
        crl: None,
        ocsp_response: None,
    })
}

/// The rustls server config of a QUIC listener: the same certificate, key and client
/// verification as a TLS listener with `settings`, and the ALPN protocol `alpn`.
pub(crate) fn quic_tls_config(
    settings: &TlsSettings,
    alpn: &[u8],
) -> Result<ServerConfig, TransportError> {
    let mut config = server_config(settings)?;
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn server_config(settings: &TlsSettings) -> Result<ServerConfig, TransportError> {
    let provider = provider();
    let certs = read_certs("certificate", &settings.cert)?;
    let key = PrivateKeyDer::from_pem_file(&settings.key).map_err(|e| TransportError::File {
        what: "private key",
        path: settings.key.clone(),
        cause: e.to_string(),
    })?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TransportError::Tls(e.to_string()))?;
    let builder = match &settings.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs("client CA", ca)? {
                roots.add(cert).map_err(|e| TransportError::File {
                    what: "client CA",
                    path: ca.clone(),
                    cause: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match &settings.crl {
                Some(crl) => verifier.with_crls(read_crls(crl)?),
                None => verifier,
            };
            let verifier = if settings.require_client_cert {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier.build().map_err(|e| TransportError::File {
                what: "client CA",
                path: ca.clone(),
                cause: e.to_string(),
            })?;
            builder.with_client_cert_verifier(ExplainedRefusals::new(verifier))
        }
    };
    let ocsp = match &settings.ocsp_response {
        Some(path) => read_file("OCSP response", path)?,
        None => Vec::new(),
    };
    let config = builder
        .with_single_cert_with_ocsp(certs, key, ocsp)
        .map_err(|e| TransportError::KeyPair {
            cert: settings.cert.clone(),
            key: settings.key.clone(),
            cause: e.to_string(),
        })?;
    Ok(config)
}

/// Every certificate in a PEM file; an error names the file.
fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TransportError> {
    let error = |cause: String| TransportError::File {
        what,
        path: path.to_owned(),
        cause,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if certs.is_empty() {
        return Err(error("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// Every certificate revocation list in a PEM file; an error names the file.
fn read_crls(path: &Path) -> Result<Vec<CertificateRevocationListDer<'static>>, TransportError> {
    let error = |cause: String| TransportError::File {
        what: "certificate revocation list",
        path: path.to_owned(),
        cause,
    };
    let crls = CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if crls.is_empty() {
        return Err(error("no PEM X509 CRL in it".into()));
    }
    Ok(crls)
}

/// A whole file (an OCSP response is DER, as `openssl ocsp -respout` writes it); an error
/// names the file.
fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TransportError> {
    let bytes = std::fs::read(path).map_err(|e| TransportError::File {
        what,
        path: path.to_owned(),
        cause: e.to_string(),
    })?;
    if bytes.is_empty() {
        return Err(TransportError::File {
            what,
            path: path.to_owned(),
            cause: "the file is empty".into(),
        });
    }
    Ok(bytes)
}

/// The Common Name of a DER certificate's subject.
pub(crate) fn common_name(cert: &CertificateDer<'_>) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let name = parsed.subject().iter_common_name().next()?;
    name.as_str().ok().map(str::to_owned)
}
