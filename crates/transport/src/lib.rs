//! Transports under MQTT: TLS (rustls with the ring provider) and MQTT over WebSocket
//! (RFC 6455 with tungstenite), alone or together (secure WebSocket: TLS outermost), as
//! `ring-runtime` stream layers. Bytes in, MQTT bytes out: the codec above never sees a record
//! or a frame.
//!
//! - Server side (the broker): [`Transports`], every configured listener and the layer a
//!   connection accepted on it gets ([`MqttTransport`]: rustls' unbuffered server API, so an
//!   idle connection holds no TLS buffer); certificates reload in place. A client certificate
//!   refused for a cause the operator can fix (X.509 v1) is named: [`CertificateRefusal`].
//! - Client side (the load generator): [`Connector`] and its [`ClientLayer`].
//!
//! The layering itself ([`Stack`]: which of TLS and WebSocket a connection has, and how bytes
//! pass between them) exists once for both sides; what differs (rustls' server or client
//! connection, WebSocket upgrade answered or requested, frames masked or not) is a named half.
//!
//! A listener may expect a PROXY protocol header (v1 or v2) before all of that, from the load
//! balancers it trusts ([`proxy`]): the header is read first, then the connection gets its
//! layer with the client's address the header named.
//!
//! What a server connection's transport holds for its peer between reads (a partial TLS
//! record, the WebSocket upgrade request, a partial frame header) is bounded per connection and
//! charged to a budget the broker shares ([`HoldLimit`]); WebSocket payload is never held (it
//! goes to MQTT as it arrives), and a message over the largest size is refused from the header
//! that takes it over (close 1009).
//!
//! What this crate must not know: MQTT sessions or packets, the broker's config file (the broker
//! parses and validates it and hands over the typed settings of [`config`]), its metrics (they
//! map [`TransportKind`]) or its shards.
#![forbid(unsafe_code)]

mod cidr;
mod client;
mod client_cert;
pub mod config;
mod error;
mod hold;
mod listeners;
pub mod proxy;
pub mod quic;
mod server_layer;
mod stack;
mod tls;
mod tls_session;
mod ws;

pub use cidr::{Cidr, CidrError};
pub use client::{ClientLayer, Connector};
pub use config::{
    AllowedOrigins, ClientSettings, ListenerKind, ListenerSettings, QuicListener, TlsSettings,
    TransportListener,
};
pub use error::{CertificateRefusal, ClientError, TransportError};
pub use hold::{HeldOver, HoldLimit, MIN_HOLD_PER_CONNECTION, SharedBudget};
pub use listeners::Transports;
pub use proxy::{ProxyHeader, ProxyReader, ProxyTrust, ReadStep};
pub use server_layer::{MqttTransport, NoCommonName};
pub use stack::{Stack, TransportKind};
pub use tls::load_server_config;
