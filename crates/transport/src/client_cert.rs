//! The client certificate verifier of a TLS listener with `client_ca`: webpki's, which decides
//! everything, wrapped only to name one cause of refusal an operator can fix. webpki accepts
//! nothing but X.509 v3 certificates from the client (a v1 CA is fine as a trust anchor in
//! `client_ca`); `openssl x509 -req` without `-extfile` makes v1 certificates, and mosquitto
//! accepts them. When webpki refuses a chain in which such a certificate is, the error becomes
//! a [`CertificateRefusal`] the broker logs at warn; the alert the client gets is the same
//! (certificate unknown).
//!
//! Nothing is verified here: every question goes to webpki, and its answers pass unchanged
//! except for the error's description.

use std::sync::Arc;

use rustls::SignatureScheme;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, OtherError};
use x509_parser::x509::X509Version;

use crate::error::CertificateRefusal;

/// webpki's client certificate verifier, whose refusals of a non-v3 certificate name it.
#[derive(Debug)]
pub(crate) struct ExplainedRefusals {
    webpki: Arc<dyn ClientCertVerifier>,
}

impl ExplainedRefusals {
    /// Wraps a verifier built by `WebPkiClientVerifier::builder_with_provider`.
    pub(crate) fn new(webpki: Arc<dyn ClientCertVerifier>) -> Arc<Self> {
        Arc::new(Self { webpki })
    }
}

impl ClientCertVerifier for ExplainedRefusals {
    fn offer_client_auth(&self) -> bool {
        self.webpki.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.webpki.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        self.webpki
            .verify_client_cert(end_entity, intermediates, now)
            .map_err(|error| explain(error, end_entity, intermediates))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.webpki.requires_raw_public_keys()
    }
}

/// webpki's refusal of a chain, as a [`CertificateRefusal`] when a certificate in it is not
/// X.509 v3; any other error unchanged.
fn explain(
    error: Error,
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> Error {
    if !matches!(error, Error::InvalidCertificate(_)) {
        return error;
    }
    match not_v3(end_entity, intermediates) {
        Some(refusal) => {
            Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))))
        }
        None => error,
    }
}

/// The first certificate of the chain the client sent that is not X.509 v3, its own first.
fn not_v3(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> Option<CertificateRefusal> {
    if let Some(version) = x509_version(end_entity).filter(|v| *v != 3) {
        return Some(CertificateRefusal::ClientNotV3 { version });
    }
    let version = intermediates
        .iter()
        .filter_map(x509_version)
        .find(|v| *v != 3)?;
    Some(CertificateRefusal::IntermediateNotV3 { version })
}

/// The X.509 version of a DER certificate (1 to 3); `None` when it does not parse.
fn x509_version(cert: &CertificateDer<'_>) -> Option<u8> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    let X509Version(zero_based) = parsed.version();
    u8::try_from(zero_based).ok()?.checked_add(1)
}

#[cfg(test)]
mod tests;
