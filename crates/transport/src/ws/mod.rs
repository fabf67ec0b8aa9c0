//! MQTT over WebSocket (RFC 6455, subprotocol `mqtt`) with tungstenite: its handshake and frame
//! reader run over an in-memory pipe fed by the layer ([`pipe`]); outbound MQTT bytes leave as
//! one binary frame per turn. The server answers the upgrade and sends plain frames
//! ([`WsSession`]); the client requests it and masks its frames ([`WsClient`]).

mod client;
mod pipe;
mod server;

pub(crate) use client::WsClient;
#[cfg(test)]
pub(crate) use client::format_binary;
#[cfg(test)]
pub(crate) use pipe::apply_mask;
pub use server::WsSession;
