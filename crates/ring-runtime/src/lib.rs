//! Thread-per-core reactors on io_uring with an epoll fallback.
//!
//! Knows nothing about MQTT: a protocol handler plugs into each shard.
