//! A SCRAM client (RFC 5802, RFC 7677) for the tests, written from the RFCs: its own HMAC
//! (RFC 2104) and PBKDF2 (RFC 8018, one block) over the `sha2` hashes, none of the broker's
//! code. `ScramClient` makes client-first, client-final from server-first, and checks
//! server-final.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::Digest as _;

/// The hash a mechanism is built on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    Sha256,
    Sha512,
}

impl Hash {
    /// The MQTT Authentication Method (the SASL mechanism name).
    pub fn method(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn digest(self, parts: &[&[u8]]) -> Vec<u8> {
        match self {
            Self::Sha256 => {
                let mut hasher = sha2::Sha256::new();
                parts.iter().for_each(|p| hasher.update(p));
                hasher.finalize().to_vec()
            }
            Self::Sha512 => {
                let mut hasher = sha2::Sha512::new();
                parts.iter().for_each(|p| hasher.update(p));
                hasher.finalize().to_vec()
            }
        }
    }

    fn block_len(self) -> usize {
        match self {
            Self::Sha256 => 64,
            Self::Sha512 => 128,
        }
    }

    /// HMAC (RFC 2104): H((K ^ opad) || H((K ^ ipad) || text)).
    pub fn hmac(self, key: &[u8], text: &[u8]) -> Vec<u8> {
        let mut block = if key.len() > self.block_len() {
            self.digest(&[key])
        } else {
            key.to_vec()
        };
        block.resize(self.block_len(), 0);
        let inner_pad: Vec<u8> = block.iter().map(|b| b ^ 0x36).collect();
        let outer_pad: Vec<u8> = block.iter().map(|b| b ^ 0x5c).collect();
        let inner = self.digest(&[&inner_pad, text]);
        self.digest(&[&outer_pad, &inner])
    }

    /// PBKDF2 (RFC 8018) with this HMAC, one block: Hi(password, salt, i) of RFC 5802.
    pub fn pbkdf2(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut u = self.hmac(password, &[salt, &1u32.to_be_bytes()].concat());
        let mut result = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &u);
            result.iter_mut().zip(&u).for_each(|(r, x)| *r ^= x);
        }
        result
    }
}

/// One client exchange.
pub struct ScramClient {
    hash: Hash,
    password: String,
    first_bare: String,
    nonce: String,
    /// The ServerSignature server-final must carry, once client-final is made.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(hash: Hash, user: &str, password: &str) -> Self {
        let nonce = format!("{:032x}", rand::random::<u128>());
        let escaped = user.replace('=', "=3D").replace(',', "=2C");
        Self {
            hash,
            password: password.to_owned(),
            first_bare: format!("n={escaped},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    /// client-first: the GS2 header `n,,` (no channel binding) and the bare message.
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.first_bare).into_bytes()
    }

    /// client-final for `server_first`; fails the test if server-first is not well formed.
    pub fn client_final(&mut self, server_first: &[u8]) -> Vec<u8> {
        let server_first = std::str::from_utf8(server_first).expect("server-first is UTF-8");
        let mut fields = server_first.split(',');
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .expect("r=");
        let salt = fields
            .next()
            .and_then(|f| f.strip_prefix("s="))
            .expect("s=");
        let iterations = fields
            .next()
            .and_then(|f| f.strip_prefix("i="))
            .expect("i=");
        assert!(nonce.starts_with(&self.nonce), "the server kept our nonce");
        assert!(
            nonce.len() > self.nonce.len(),
            "the server added its own nonce"
        );
        let salt = BASE64.decode(salt).expect("salt is base64");
        let iterations: u32 = iterations.parse().expect("i= is a number");
        let hash = self.hash;
        let salted = hash.pbkdf2(self.password.as_bytes(), &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        let stored_key = hash.digest(&[&client_key]);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hash.hmac(&salted, b"Server Key");
        self.expected_server_signature = Some(hash.hmac(&server_key, auth_message.as_bytes()));
        format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes()
    }

    /// Whether `server_final` proves the server knew this user's keys.
    pub fn server_final_valid(&self, server_final: &[u8]) -> bool {
        let expected = self
            .expected_server_signature
            .as_ref()
            .expect("client-final made");
        server_final == format!("v={}", BASE64.encode(expected)).as_bytes()
    }
}

#[test]
fn hmac_and_pbkdf2_match_rfc_7677_example() {
    // RFC 7677 section 3: the client-final proof for user "user", password "pencil".
    let mut client = ScramClient::new(Hash::Sha256, "user", "pencil");
    client.first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO".into();
    client.nonce = "rOprNGfwEbeRWgbNEkqO".into();
    let server_first =
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    let client_final = client.client_final(server_first);
    assert_eq!(
        String::from_utf8(client_final).unwrap(),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    assert!(client.server_final_valid(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="));
}
