//! The client side of TLS towards a remote broker: its CA, the name checked in its
//! certificate, and an optional client certificate. The files are read at each connection
//! attempt, so replaced certificates are picked up by the next reconnect.

use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use super::error::BridgeError;
use crate::settings::BridgeTls;

/// A client config and the server name it checks.
pub(crate) struct TlsClient {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl TlsClient {
    /// Reads the files named in `tls`; the name checked is `tls.server_name`, else `address`'s
    /// host.
    pub(crate) fn load(tls: &BridgeTls, address: &str) -> Result<Self, BridgeError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for cert in read_certs(&tls.ca_file)? {
            roots
                .add(cert)
                .map_err(|e| file_error(&tls.ca_file, &e.to_string()))?;
        }
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| BridgeError::Tls(e.to_string()))?
            .with_root_certificates(roots);
        let config = match &tls.client_cert {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| file_error(key, &e.to_string()))?;
                builder
                    .with_client_auth_cert(read_certs(cert)?, key)
                    .map_err(|e| BridgeError::Tls(format!("client certificate: {e}")))?
            }
        };
        let name = tls
            .server_name
            .clone()
            .unwrap_or_else(|| host_of(address).to_owned());
        let server_name = ServerName::try_from(name.clone())
            .map_err(|_| BridgeError::Tls(format!("{name:?} is not a server name")))?;
        Ok(Self {
            config: Arc::new(config),
            server_name,
        })
    }

    /// A new session for one connection.
    pub(crate) fn session(&self) -> Result<ClientConnection, BridgeError> {
        ClientConnection::new(Arc::clone(&self.config), self.server_name.clone())
            .map_err(|e| BridgeError::Tls(e.to_string()))
    }
}

/// The host of `HOST:PORT` (brackets of an IPv6 literal removed).
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

fn file_error(path: &Path, cause: &str) -> BridgeError {
    BridgeError::Tls(format!("{}: {cause}", path.display()))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, BridgeError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, &e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, &e.to_string()))?;
    if certs.is_empty() {
        return Err(file_error(path, "no PEM certificate in it"));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("broker.example.com:8883"), "broker.example.com");
        assert_eq!(host_of("127.0.0.1:1883"), "127.0.0.1");
        assert_eq!(host_of("[::1]:1883"), "::1");
    }
}
