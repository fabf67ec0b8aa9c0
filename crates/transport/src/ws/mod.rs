//! MQTT over WebSocket (RFC 6455, subprotocol `mqtt`) with tungstenite: its handshake and frame
//! reader run over an in-memory pipe fed by the layer ([`pipe`]); outbound MQTT bytes leave as
//! one binary frame per turn. The server answers the upgrade and sends plain frames
//! ([`WsSession`]).

mod pipe;
mod server;

pub use server::WsSession;
