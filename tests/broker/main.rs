//! Black-box tests of the RingMQ broker: each test starts its own broker (two shards on
//! `127.0.0.1:0`) and talks to it over real sockets, with the raw codec client or rumqttc.
//! Run on both backends: `RINGMQ_BACKEND=epoll cargo test -p ringmq --test broker`.

mod acl;
mod admin;
mod auth;
mod backends;
mod binary;
mod bridge;
mod client;
mod cluster;
mod cluster_replay;
mod cluster_retained;
mod cluster_sessions;
mod cluster_tls;
mod connect;
mod crash;
mod examples;
mod expiry;
mod harness;
mod http_auth_server;
mod ip;
mod limits;
mod mailbox_stress;
mod malformed;
mod memory;
mod nats_cluster;
mod ops;
mod ops_hostile;
mod overload;
mod passwords;
mod persistence;
mod pipelined;
mod pki;
mod ports;
mod process;
mod qos;
mod queue_bytes;
mod quotas;
mod real_clients;
mod redis_server;
mod reload;
mod retained;
#[cfg(debug_assertions)]
mod shard_exit;
mod shared;
mod slow;
mod subscribe;
mod sys;
mod takeover;
mod takeover_stream;
mod throttle;
mod tls;
mod will;
mod will_acl;
mod ws;
mod ws_limits;
