//! The attribute syntax of the client's SCRAM messages (RFC 5802 section 7): what the server
//! needs of client-first and client-final, every deviation a [`ScramError`].

use super::error::ScramError;

/// The client-first message, split.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ClientFirst<'a> {
    /// The GS2 header as sent (`n,,` or `y,,`, with the authzid when one was given).
    pub(super) gs2_header: &'a str,
    /// The username, `=2C` and `=3D` decoded.
    pub(super) username: String,
    /// The client's nonce.
    pub(super) nonce: &'a str,
    /// client-first-message-bare: what follows the GS2 header.
    pub(super) bare: &'a str,
}

/// The client-final message, split.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ClientFinal<'a> {
    /// `c=`: the base64 of the GS2 header (no channel binding data, as none is offered).
    pub(super) channel_binding: &'a str,
    /// `r=`: the whole nonce, the client's then the server's.
    pub(super) nonce: &'a str,
    /// client-final-message-without-proof.
    pub(super) without_proof: &'a str,
    /// `p=`: the proof, in base64.
    pub(super) proof: &'a str,
}

/// Parses client-first: `gs2-cbind-flag "," [authzid] "," [m=...,] n=user,r=nonce[,ext]`.
pub(super) fn client_first(text: &str) -> Result<ClientFirst<'_>, ScramError> {
    let (flag, rest) = text
        .split_once(',')
        .ok_or(ScramError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => return Err(ScramError::ChannelBindingUnsupported),
        _ => return Err(ScramError::Malformed("unknown channel binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(ScramError::Malformed("no client-first-message-bare"))?;
    let gs2_header = &text[..flag.len() + authzid.len() + 2];
    let mut attributes = bare.split(',');
    let first = attributes.next().unwrap_or_default();
    if first.starts_with("m=") {
        return Err(ScramError::Malformed(
            "mandatory extension m= is not supported",
        ));
    }
    let username = decode_saslname(value_of(first, 'n')?)?;
    let nonce = value_of(attributes.next().unwrap_or_default(), 'r')?;
    check_nonce(nonce)?;
    if !authzid.is_empty() && decode_saslname(value_of(authzid, 'a')?)? != username {
        return Err(ScramError::Malformed("authzid differs from the username"));
    }
    Ok(ClientFirst {
        gs2_header,
        username,
        nonce,
        bare,
    })
}

/// Parses client-final: `c=...,r=...[,ext],p=proof`.
pub(super) fn client_final(text: &str) -> Result<ClientFinal<'_>, ScramError> {
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or(ScramError::Malformed("client-final has no proof"))?;
    let mut attributes = without_proof.split(',');
    let channel_binding = value_of(attributes.next().unwrap_or_default(), 'c')?;
    let nonce = value_of(attributes.next().unwrap_or_default(), 'r')?;
    Ok(ClientFinal {
        channel_binding,
        nonce,
        without_proof,
        proof,
    })
}

/// The value of attribute `name` in `attribute` (`name=value`).
fn value_of(attribute: &str, name: char) -> Result<&str, ScramError> {
    attribute
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix('='))
        .ok_or(ScramError::MissingAttribute(name))
}

/// A nonce is printable ASCII without `,` (RFC 5802 `printable`), and not empty.
fn check_nonce(nonce: &str) -> Result<(), ScramError> {
    let printable = |b: u8| (0x21..=0x7e).contains(&b) && b != b',';
    if nonce.is_empty() || !nonce.bytes().all(printable) {
        return Err(ScramError::Malformed("the nonce is not printable ASCII"));
    }
    Ok(())
}

/// A `saslname`: `=2C` stands for `,` and `=3D` for `=`; any other `=` is malformed.
fn decode_saslname(name: &str) -> Result<String, ScramError> {
    let mut decoded = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        decoded.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        decoded.push(match escape {
            Some("=2C") => ',',
            Some("=3D") => '=',
            _ => return Err(ScramError::Malformed("bad `=` escape in the username")),
        });
        rest = &rest[at + 3..];
    }
    decoded.push_str(rest);
    if decoded.is_empty() {
        return Err(ScramError::Malformed("empty username"));
    }
    Ok(decoded)
}
