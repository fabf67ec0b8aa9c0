//! webpki's verifier, wrapped, against certificates made here: v3 ones by rcgen, and an X.509
//! v1 one as `openssl x509 -req` makes it without `-extfile` (kept as PEM below; it is
//! self-signed and its dates do not matter, webpki refuses it before looking at them).

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;

use super::*;

/// `openssl x509 -req -in u.csr -signkey u.key -days 36500` (CN v1-client, P-256): X.509 v1.
const V1_CERT: &str = "-----BEGIN CERTIFICATE-----
MIIBJDCBywIUP06HoVe88PAl+HYRUpWLZcXBG8UwCgYIKoZIzj0EAwIwFDESMBAG
A1UEAwwJdjEtY2xpZW50MCAXDTI2MTIwNTA0MDM0OVoYDzIxMjYxMTExMDQwMzQ5
WjAUMRIwEAYDVQQDDAl2MS1jbGllbnQwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAT1fN06MUg3mkja9g8jTP1VB46TeKUW0U1FvvnkgQ080ZKWTyIkufT+gNOPnrb0
MMDtSktYFp9cNIy3bMSIAh46MAoGCCqGSM49BAMCA0gAMEUCIQD+YLeyYO3iexsX
nUPtnguHBStWEs1UJVcmzkUFy2h9awIgX616HOuocsZrCtdEnmiHNXfIgLxSqicg
vM3uLmGT3a8=
-----END CERTIFICATE-----
";

fn v1_cert() -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(V1_CERT.as_bytes()).expect("the v1 certificate reads")
}

/// A CA made by rcgen (X.509 v3).
fn v3_ca() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA")
}

/// A client certificate `ca` signed (X.509 v3).
fn v3_client(ca: &CertifiedIssuer<'static, KeyPair>) -> CertificateDer<'static> {
    let key = KeyPair::generate().expect("key");
    let cert = CertificateParams::new(Vec::<String>::new())
        .expect("params")
        .signed_by(&key, ca)
        .expect("client certificate");
    cert.der().clone()
}

/// webpki's verifier trusting `ca`, wrapped.
fn verifier_trusting(ca: &CertifiedIssuer<'static, KeyPair>) -> Arc<ExplainedRefusals> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone()).expect("the CA is usable");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .expect("a verifier");
    ExplainedRefusals::new(webpki)
}

/// What the wrapped verifier, trusting a CA of its own, names when it refuses this chain.
fn refusal_of(
    end_entity: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
) -> Option<CertificateRefusal> {
    let verifier = verifier_trusting(&v3_ca());
    let refused = verifier.verify_client_cert(end_entity, intermediates, UnixTime::now());
    CertificateRefusal::of(&refused.expect_err("refused"))
}

#[test]
fn a_v1_client_certificate_is_refused_and_named() {
    assert_eq!(
        refusal_of(&v1_cert(), &[]),
        Some(CertificateRefusal::ClientNotV3 { version: 1 })
    );
}

#[test]
fn a_v1_intermediate_the_client_sent_is_named() {
    assert_eq!(
        refusal_of(&v3_client(&v3_ca()), &[v1_cert()]),
        Some(CertificateRefusal::IntermediateNotV3 { version: 1 })
    );
}

#[test]
fn other_refusals_and_accepted_certificates_are_webpki_s_own() {
    let ca = v3_ca();
    let verifier = verifier_trusting(&ca);
    let now = UnixTime::now();
    assert!(
        verifier
            .verify_client_cert(&v3_client(&ca), &[], now)
            .is_ok()
    );
    let foreign = v3_client(&v3_ca());
    let refused = verifier.verify_client_cert(&foreign, &[], now);
    let unwrapped = verifier.webpki.verify_client_cert(&foreign, &[], now);
    assert_eq!(
        refused.expect_err("another CA's certificate is refused"),
        unwrapped.expect_err("by webpki")
    );
    assert!(verifier.client_auth_mandatory() && verifier.offer_client_auth());
}
