//! [`MqttTransport`]: the stream layer of a TLS, WebSocket or secure WebSocket connection the
//! broker accepted. TLS (a rustls `UnbufferedServerConnection`) is outermost; WebSocket framing
//! runs on its plaintext.

use std::net::SocketAddr;

use rustls::server::UnbufferedServerConnection;

use crate::error::CertificateRefusal;
use crate::hold::{Hold, HoldLimit};
use crate::stack::Stack;
use crate::tls::common_name;
use crate::tls_session::TlsSession;
use crate::ws::WsSession;

/// One accepted connection's transport state, kept on the shard that owns the connection.
pub type MqttTransport = Stack<TlsSession, WsSession, ServerSide>;

/// What the server side keeps beside the halves.
pub struct ServerSide {
    peer: SocketAddr,
    /// The listener makes the client certificate's CN the username.
    identity_as_username: bool,
}

/// The listener takes the username from the client certificate, and the client sent none
/// with a Common Name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoCommonName;

impl Stack<TlsSession, WsSession, ServerSide> {
    pub(crate) fn server(
        tls: Option<UnbufferedServerConnection>,
        ws: Option<WsSession>,
        peer: SocketAddr,
        identity_as_username: bool,
        hold: Option<&HoldLimit>,
    ) -> Self {
        let side = ServerSide {
            peer,
            identity_as_username,
        };
        let mut stack = Self::new(tls.map(TlsSession::new), ws, side);
        if let Some(limit) = hold {
            stack.set_hold(Hold::new(limit.clone()));
        }
        stack
    }

    pub fn peer(&self) -> SocketAddr {
        self.side().peer
    }

    /// Why the TLS handshake refused the client's certificate, when the cause is one an
    /// operator can fix ([`CertificateRefusal`]); `None` for any other failure.
    pub fn certificate_refusal(&self) -> Option<CertificateRefusal> {
        self.tls().and_then(TlsSession::certificate_refusal)
    }

    /// For a listener with `identity_as_username`: the verified client certificate's Common
    /// Name (`Err` when there is none). `None` for other listeners.
    pub fn username_from_certificate(&self) -> Option<Result<String, NoCommonName>> {
        if !self.side().identity_as_username {
            return None;
        }
        let certs = self.tls().and_then(TlsSession::peer_certificates);
        let cert = certs.and_then(<[_]>::first);
        Some(cert.and_then(common_name).ok_or(NoCommonName))
    }
}
