//! Certificates made for one test (rcgen): a CA, a server certificate for 127.0.0.1 and
//! localhost, client certificates, and a second, untrusted CA; PEM files in a temporary
//! directory. Nothing here is meant for real use.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertificateRevocationListParams, CertifiedIssuer, DnType,
    IsCa, KeyIdMethod, KeyPair, KeyUsagePurpose, RevocationReason, RevokedCertParams, SerialNumber,
    date_time_ymd,
};

/// A certificate authority that signs test certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Its certificate, PEM.
    pub cert: PathBuf,
}

/// A certificate and its key, PEM files.
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    /// A new CA named `name`, its certificate written to `dir`.
    pub fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let cert = dir.join(format!("{name}.pem"));
        std::fs::write(&cert, issuer.pem()).expect("write CA certificate");
        Self { issuer, cert }
    }

    /// A server certificate for 127.0.0.1 and localhost, written as `<file>.pem`/`<file>.key`.
    pub fn server(&self, dir: &Path, file: &str) -> CertFiles {
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let mut params = CertificateParams::new(names).expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "ringmq test server");
        self.sign(params, dir, file)
    }

    /// A client certificate whose Common Name is `common_name`.
    pub fn client(&self, dir: &Path, common_name: &str) -> CertFiles {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        self.sign(params, dir, common_name)
    }

    /// A client certificate like [`Self::client`] with serial number `serial`.
    pub fn client_numbered(&self, dir: &Path, common_name: &str, serial: u64) -> CertFiles {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.serial_number = Some(SerialNumber::from(serial));
        self.sign(params, dir, common_name)
    }

    /// A certificate revocation list of this CA revoking `serials`, written (PEM) to `path`.
    pub fn write_crl(&self, path: &Path, serials: &[u64]) {
        let revoked = (serials.iter())
            .map(|&serial| RevokedCertParams {
                serial_number: SerialNumber::from(serial),
                revocation_time: date_time_ymd(2024, 1, 2),
                reason_code: Some(RevocationReason::KeyCompromise),
                invalidity_date: None,
            })
            .collect();
        let params = CertificateRevocationListParams {
            this_update: date_time_ymd(2024, 1, 1),
            next_update: date_time_ymd(2099, 1, 1),
            crl_number: SerialNumber::from(serials.len() as u64 + 1),
            issuing_distribution_point: None,
            revoked_certs: revoked,
            key_identifier_method: KeyIdMethod::Sha256,
        };
        let crl = params.signed_by(&self.issuer).expect("signed CRL");
        std::fs::write(path, crl.pem().expect("CRL PEM")).expect("write CRL");
    }

    /// Writes this CA's private key (PEM) to `path` (for `openssl ocsp`).
    pub fn write_key(&self, path: &Path) {
        std::fs::write(path, self.issuer.key().serialize_pem()).expect("write CA key");
    }

    fn sign(&self, params: CertificateParams, dir: &Path, file: &str) -> CertFiles {
        let key = KeyPair::generate().expect("key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("signed certificate");
        let files = CertFiles {
            cert: dir.join(format!("{file}.pem")),
            key: dir.join(format!("{file}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        files
    }
}

/// A CA, a server certificate and a client CA setup in one temporary directory.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    pub ca: TestCa,
    pub server: CertFiles,
}

impl TestPki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let ca = TestCa::new(dir.path(), "test-ca");
        let server = ca.server(dir.path(), "server");
        Self { dir, ca, server }
    }

    /// The TLS keys of a listener table using this PKI's server certificate.
    pub fn listener_keys(&self) -> String {
        format!(
            "cert = {:?}\nkey = {:?}\n",
            self.server.cert.display().to_string(),
            self.server.key.display().to_string()
        )
    }
}

/// A TLS client over `tcp` trusting `pki`'s CA, for server name `localhost`.
pub fn tls_client_stream(
    pki: &TestPki,
    tcp: std::net::TcpStream,
) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls_pki_types::CertificateDer::from_pem_file(&pki.ca.cert)
        .expect("the CA certificate reads");
    roots.add(ca).expect("the CA certificate is usable");
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("a valid server name");
    let connection =
        rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("a TLS client");
    rustls::StreamOwned::new(connection, tcp)
}
