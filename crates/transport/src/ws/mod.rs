//! MQTT over WebSocket (RFC 6455, subprotocol `mqtt`) with tungstenite: its handshakes run over
//! an in-memory pipe fed by the layer ([`pipe`]); outbound MQTT bytes leave as one binary frame
//! per turn. The server answers the upgrade, reads frames with its own streaming reader
//! ([`reader`]: binary payload goes to MQTT as it arrives, no message is assembled) and sends
//! plain frames ([`WsSession`]); the client requests the upgrade, reads with tungstenite and
//! masks its frames ([`WsClient`]).

mod client;
mod pipe;
mod reader;
mod server;
#[cfg(test)]
mod tests;

pub(crate) use client::WsClient;
#[cfg(test)]
pub(crate) use client::format_binary;
#[cfg(test)]
pub(crate) use pipe::apply_mask;
pub use server::{WsEndpoint, WsSession};
